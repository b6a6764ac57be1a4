package notify

import "time"

// TemplateReceivedStatus is the confirmation of a submission and the
// request's status since, in one notice: what a confirmation and the
// status changes held with it in one coalescing window become.
const TemplateReceivedStatus = "request-received-status"

// StatusTemplates are the templates of a request's status notices: the
// ones a newer notice of the same request and channel may supersede while
// they are held.
func StatusTemplates() []string {
	return []string{TemplateConfirmation, TemplateStatus, TemplateReceivedStatus}
}

// Notice is what a notification says: its template and the template's
// parameters.
type Notice struct {
	Template string
	Params   map[string]string
}

// Superseded is a held notice that a newer one of its request and channel
// took over: what it said and when it was due.
type Superseded struct {
	ID        string
	Notice    Notice
	NotBefore time.Time
}

// Coalesce returns the one notice that tells the citizen what earlier and
// later, two status notices of one request, told apart. A citizen wants
// the facts that still hold, not the history: that the request was
// received, with the protocol number they quote at a counter (the
// confirmation's whole point, so it is never dropped), and the status it
// has now. Intermediate statuses are left out: "in progress" is stale news
// once "completed" is in the same mail. Status notices of one request may
// be handled out of order (several handlers per queue), so the status
// that changed last wins, by its changedAt; without one on both sides, the
// later arrival does.
func Coalesce(earlier, later Notice) Notice {
	received := earlier.received() || later.received()
	latest := later
	if later.Params["status"] == "" || earlier.changedAfter(later) {
		latest = earlier // later is a confirmation, or older news
	}
	status, changedAt := latest.Params["status"], latest.Params["changedAt"]
	params := map[string]string{}
	for k, v := range map[string]string{"protocol": firstOf(later.Params["protocol"], earlier.Params["protocol"]),
		"status": status, "changedAt": changedAt} {
		if v != "" {
			params[k] = v
		}
	}
	switch {
	case received && status != "":
		return Notice{Template: TemplateReceivedStatus, Params: params}
	case received:
		return Notice{Template: TemplateConfirmation, Params: params}
	}
	return Notice{Template: TemplateStatus, Params: params}
}

// received reports whether n confirms the submission.
func (n Notice) received() bool {
	return n.Template == TemplateConfirmation || n.Template == TemplateReceivedStatus
}

// changedAfter reports whether n's status changed after other's, both
// being known.
func (n Notice) changedAfter(other Notice) bool {
	a, errA := time.Parse(time.RFC3339Nano, n.Params["changedAt"])
	b, errB := time.Parse(time.RFC3339Nano, other.Params["changedAt"])
	return errA == nil && errB == nil && a.After(b)
}

func firstOf(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

// Narrow returns the template a notice of template may use for c. A
// combined notice without the citizen's consent to progress notices (it
// may be withdrawn while the notice is held) keeps only the confirmation,
// which answers their own act and needs none: withholding it all would
// lose the confirmation.
func (c Contact) Narrow(template string) string {
	if template == TemplateReceivedStatus && !c.WantsProgressNotices() {
		return TemplateConfirmation
	}
	return template
}

// Supersede returns what n says once it takes over held, the notices of
// its request and channel still held (oldest first), and when it is due:
// at due, or at the earliest of their due times if sooner, so that a
// stream of changes cannot put the notice off for ever.
func Supersede(held []Superseded, n Notice, due time.Time) (Notice, time.Time) {
	if len(held) == 0 {
		return n, due
	}
	acc := held[0].Notice
	for _, h := range held[1:] {
		acc = Coalesce(acc, h.Notice)
	}
	for _, h := range held {
		if h.NotBefore.Before(due) {
			due = h.NotBefore
		}
	}
	return Coalesce(acc, n), due
}
