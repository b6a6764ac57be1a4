// Package dlq operates dead-letter queues: list and inspect dead letters
// (payloads masked by the registry's sensitivity), and replay or purge them
// deliberately — an operator identity and a reason are required, a dry run
// shows what would happen, and every action is written to the dlq_audit
// table. Replays go back to the consumer's own queue only; the consumer's
// inbox makes a second replay of the same message harmless.
package dlq

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/agora-platform/agora/pkg/fabric/broker"
	"github.com/agora-platform/agora/pkg/fabric/envelope"
	"github.com/agora-platform/agora/pkg/fabric/internal/crosstenant"
	"github.com/agora-platform/agora/pkg/fabric/internal/security"
	"github.com/agora-platform/agora/pkg/fabric/internal/wire"
	"github.com/agora-platform/agora/pkg/fabric/registry"
	"github.com/agora-platform/agora/pkg/fabric/tenant"
	"github.com/agora-platform/agora/pkg/fabric/topology"
)

// Errors returned by Ops.
var (
	ErrNoOperator = errors.New("dlq: an operator identity is required")
	ErrNoReason   = errors.New("dlq: a reason is required")
	ErrNoFilter   = errors.New("dlq: say which letters: ids, a filter, or all")
	ErrNotFound   = errors.New("dlq: no such letter")
	// ErrNotReplayable: the catalog marks the letter's type replayable:
	// false (its effect is outside the platform, e.g. a message sent to a
	// citizen, and inboxes cannot make a second one harmless). Such letters
	// stay in the DLQ; purge them, or have their owner issue them anew.
	ErrNotReplayable = errors.New("dlq: not replayable")
)

// NotReplayableError is a replay that left letters in the DLQ because of
// their type. It wraps ErrNotReplayable.
type NotReplayableError struct {
	Types []string // the catalog types refused, sorted
	IDs   []string // the letters left in the DLQ
}

func (e *NotReplayableError) Error() string {
	return fmt.Sprintf("dlq: replay refused for %d letter(s): %s not replayable (replayable: false in the catalog); they stay in the DLQ (purge them instead): %s",
		len(e.IDs), strings.Join(e.Types, ", "), strings.Join(e.IDs, ", "))
}

func (e *NotReplayableError) Unwrap() error { return ErrNotReplayable }

// headerReplayWalk marks the copies one replay sends.
const headerReplayWalk = "x-fabric-replay-walk"

// Letter is one dead letter as an operator sees it.
type Letter struct {
	MessageID      string          `json:"messageId"`
	Type           string          `json:"type,omitempty"`
	CorrelationID  string          `json:"correlationId,omitempty"`
	TenantID       string          `json:"tenantId,omitempty"`
	Consumer       string          `json:"consumer"`
	Reason         string          `json:"reason,omitempty"`
	ErrorClass     string          `json:"errorClass,omitempty"`
	Error          string          `json:"error,omitempty"`
	Attempts       int             `json:"attempts"`
	LastAttempt    string          `json:"lastAttempt,omitempty"`
	OrigExchange   string          `json:"originalExchange,omitempty"`
	OrigRoutingKey string          `json:"originalRoutingKey,omitempty"`
	Headers        map[string]any  `json:"headers"`
	Payload        json.RawMessage `json:"payload,omitempty"` // masked
	BodyBytes      int             `json:"bodyBytes"`
	// envTenant is the envelope's tenantId, when the body decodes; TenantID
	// prefers the x-tenant-id header.
	envTenant string
}

// BelongsTo reports whether the letter is tenant's: every tenant it names
// (header and envelope) is tenant. A letter whose header and envelope
// disagree (dead-lettered as a tenant mismatch, possibly forged) belongs to
// neither tenant; only a platform operator (fabricctl, no tenant filter)
// handles it. A letter naming no tenant at all belongs to no tenant either.
func (l Letter) BelongsTo(tenant string) bool {
	return tenant != "" && l.TenantID == tenant && (l.envTenant == "" || l.envTenant == tenant)
}

// Filter selects letters. Empty fields match anything; IDs match message
// ids; All must be set to select everything.
type Filter struct {
	IDs    []string `json:"ids,omitempty"`
	Reason string   `json:"reason,omitempty"`
	Type   string   `json:"type,omitempty"`
	Tenant string   `json:"tenant,omitempty"`
	All    bool     `json:"all,omitempty"`
	// before, when set, keeps only letters dead-lettered before it
	// (retention: Archive); a letter with no readable time is kept.
	before time.Time
}

func (f Filter) empty() bool {
	return len(f.IDs) == 0 && f.Reason == "" && f.Type == "" && f.Tenant == "" && !f.All
}

func (f Filter) matches(l Letter) bool {
	if len(f.IDs) > 0 && !slices.Contains(f.IDs, l.MessageID) {
		return false
	}
	if !f.before.IsZero() {
		at, err := time.Parse(time.RFC3339Nano, l.LastAttempt)
		if err != nil || !at.Before(f.before) {
			return false
		}
	}
	return (f.Reason == "" || f.Reason == l.Reason) && (f.Type == "" || f.Type == l.Type) && (f.Tenant == "" || l.BelongsTo(f.Tenant))
}

func (f Filter) String() string {
	b, _ := json.Marshal(f)
	return string(b)
}

// Request is a replay or purge order.
type Request struct {
	Queue    string // the consumer queue Q (its DLQ is Q.dlq)
	Filter   Filter
	Operator string // who: required
	Reason   string // why: required
	DryRun   bool
	// Progress, if set, is called after each letter handled.
	Progress func(done, total int)
}

// Report is the outcome of a replay or purge.
type Report struct {
	AuditID   int64    `json:"auditId"`
	Action    string   `json:"action"`
	Queue     string   `json:"queue"`
	Matched   []string `json:"matched"`
	Succeeded int      `json:"succeeded"`
	Failed    int      `json:"failed"`
	Refused   []string `json:"refused,omitempty"`
	Errors    []string `json:"errors,omitempty"`
	DryRun    bool     `json:"dryRun"`
}

// Ops performs DLQ operations. Audit rows go to <auditSchema>.dlq_audit.
type Ops struct {
	conn        *broker.Conn
	pub         *broker.Publisher
	reg         *registry.Registry
	audit       *pgxpool.Pool
	auditSchema string
	now         func() time.Time
	// consumers name the DLQ and retry exchange of queues whose topology
	// has its own naming (For); any other queue has the platform's.
	consumers map[string]topology.Consumer
}

// New returns Ops over a broker connection, a publisher for replays and an
// audit database (its schema must have the fabric migrations).
func New(conn *broker.Conn, pub *broker.Publisher, reg *registry.Registry, audit *pgxpool.Pool, auditSchema string) *Ops {
	return &Ops{conn: conn, pub: pub, reg: reg, audit: audit, auditSchema: auditSchema, now: time.Now}
}

// For returns Ops that know consumers' own naming (a topology file's:
// car.dlq.<queue>, one imoveis.dlq shared by every queue, their retry
// exchanges): letters are read from each one's DLQ, and replayed to the
// queue through its retry exchange. In a shared DLQ a queue's letters are
// those its consumer dead-lettered (x-fabric-consumer).
func (o *Ops) For(consumers ...topology.Consumer) *Ops {
	out := *o
	out.consumers = map[string]topology.Consumer{}
	for _, c := range consumers {
		out.consumers[c.Queue] = c
	}
	return &out
}

// spec is queue's consumer, with the platform's naming unless For named it.
func (o *Ops) spec(queue string) topology.Consumer {
	if c, ok := o.consumers[queue]; ok {
		return c
	}
	return topology.Consumer{Queue: queue}
}

func headerString(h amqp.Table, k string) string {
	s, _ := h[k].(string)
	return s
}

// letter builds the operator's view of a delivery, masking its payload.
func (o *Ops) letter(queue string, d amqp.Delivery) Letter {
	l := Letter{
		MessageID: d.MessageId, Type: d.Type, CorrelationID: d.CorrelationId, TenantID: headerString(d.Headers, wire.HeaderTenant),
		Consumer: queue, Reason: headerString(d.Headers, wire.HeaderReason),
		ErrorClass: headerString(d.Headers, wire.HeaderErrorClass), Error: headerString(d.Headers, wire.HeaderError),
		Attempts: wire.Attempts(d.Headers), LastAttempt: headerString(d.Headers, wire.HeaderLastAttempt),
		OrigExchange: headerString(d.Headers, wire.HeaderOrigExchange), OrigRoutingKey: headerString(d.Headers, wire.HeaderOrigRouting),
		Headers: map[string]any{}, BodyBytes: len(d.Body),
	}
	if c := headerString(d.Headers, wire.HeaderConsumer); c != "" {
		l.Consumer = c
	}
	if l.Reason == "" {
		// Dead-lettered by the broker itself (delivery limit): no fabric headers.
		if _, ok := d.Headers["x-death"]; ok {
			l.Reason = wire.ReasonDeliveryLimit
		}
	}
	for k, v := range d.Headers {
		if k == "x-death" {
			continue
		}
		l.Headers[k] = fmt.Sprint(v)
	}
	if e, err := envelope.Decode(d.Body, 0); err == nil {
		l.envTenant = e.TenantID
		if l.Type == "" {
			l.Type = e.Type
		}
		if l.TenantID == "" {
			l.TenantID = e.TenantID
		}
		if l.CorrelationID == "" {
			l.CorrelationID = e.CorrelationID
		}
		l.Payload = Mask(o.reg, e.Type, e.Payload)
	}
	return l
}

// Mask returns payload with sensitive values replaced by "***": the fields
// the schema marks x-sensitive, and for RESTRICTED types every value except
// identifiers (keys ending in "Id"). Unknown types are masked entirely.
func Mask(reg *registry.Registry, typ string, payload []byte) json.RawMessage {
	var m map[string]any
	if err := json.Unmarshal(payload, &m); err != nil {
		return json.RawMessage(`"***"`)
	}
	def, ok := reg.Lookup(typ)
	for k := range m {
		switch {
		case !ok:
			m[k] = "***"
		case slices.Contains(def.SensitiveFields, k):
			m[k] = "***"
		case def.Sensitivity == registry.Restricted && !strings.HasSuffix(k, "Id"):
			m[k] = "***"
		}
	}
	out, _ := json.Marshal(m)
	return out
}

// browse takes every letter currently in Q's DLQ without acking and calls fn
// on each; fn reports whether it acked the letter. Letters not acked go back
// to the queue at the end, and browse returns only once the queue shows them
// again (quorum queues apply returns asynchronously), so an operation that
// follows sees every letter. The walk ends when the queue is empty: letters
// held are not delivered again meanwhile.
func (o *Ops) browse(ctx context.Context, queue string, fn func(d amqp.Delivery, i, total int) (acked bool, err error)) error {
	spec := o.spec(queue)
	dlqName, shared := spec.DLQ(), spec.SharedDLQ()
	ch, err := o.conn.Channel(ctx)
	if err != nil {
		return fmt.Errorf("dlq: %w", err)
	}
	q, err := ch.QueueDeclarePassive(dlqName, true, false, false, false, nil)
	if err != nil {
		ch.Close()
		return fmt.Errorf("dlq: %s: %w", dlqName, err)
	}
	total := q.Messages
	var held []uint64
	defer func() {
		for _, tag := range held {
			_ = ch.Nack(tag, false, true)
		}
		// Closing at once loses no ack. A quorum queue's channel holds an
		// ack back, and drops it when it closes, only while 32 or more of
		// its commands await the queue (rabbitmq-server#10327). Here each
		// ack follows a basic.get, answered only once the queue applied it
		// and every command before it, so none is held back
		// (TestPurgedLettersStayPurged; acked in one burst at the end
		// instead, hundreds of 2,000 came back).
		ch.Close()
		o.awaitDepth(dlqName, len(held))
	}()
	for i := 0; ; i++ {
		if err := ctx.Err(); err != nil {
			return err
		}
		d, ok, err := ch.Get(dlqName, false)
		if err != nil {
			return fmt.Errorf("dlq: get: %w", err)
		}
		if !ok {
			return nil
		}
		total = max(total, i+1)
		if shared && headerString(d.Headers, wire.HeaderConsumer) != queue {
			held = append(held, d.DeliveryTag) // another queue's letter
			continue
		}
		took, err := fn(d, i+1, total)
		if !took {
			held = append(held, d.DeliveryTag)
		}
		if err != nil {
			return err
		}
	}
}

// awaitDepth waits (up to 2 s) until queue shows at least n ready messages.
// It polls: a quorum queue applies returns, and the release of what a
// closed channel held, after the broker has answered, and tells no one
// when; the depth is the only sign. Past the deadline browse returns
// anyway: the letters are back soon, only not yet visible.
func (o *Ops) awaitDepth(queue string, n int) {
	if n == 0 {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	ch, err := o.conn.Channel(ctx)
	if err != nil {
		return
	}
	defer ch.Close()
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for {
		q, err := ch.QueueDeclarePassive(queue, true, false, false, false, nil)
		if err != nil || q.Messages >= n {
			return
		}
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}

// List returns up to limit letters (all when limit ≤ 0), leaving them in place.
func (o *Ops) List(ctx context.Context, queue string, limit int) ([]Letter, error) {
	var out []Letter
	errStop := errors.New("stop")
	err := o.browse(ctx, queue, func(d amqp.Delivery, _, _ int) (bool, error) {
		out = append(out, o.letter(queue, d))
		if limit > 0 && len(out) >= limit {
			return false, errStop
		}
		return false, nil
	})
	if err != nil && !errors.Is(err, errStop) {
		return nil, err
	}
	return out, nil
}

// Show returns one letter by message id.
func (o *Ops) Show(ctx context.Context, queue, id string) (Letter, error) {
	all, err := o.List(ctx, queue, 0)
	if err != nil {
		return Letter{}, err
	}
	for _, l := range all {
		if l.MessageID == id {
			return l, nil
		}
	}
	return Letter{}, fmt.Errorf("%w: %s in %s", ErrNotFound, id, o.spec(queue).DLQ())
}

func (r Request) check() error {
	switch {
	case strings.TrimSpace(r.Operator) == "":
		return ErrNoOperator
	case strings.TrimSpace(r.Reason) == "":
		return ErrNoReason
	case r.Filter.empty():
		return ErrNoFilter
	case r.Queue == "":
		return errors.New("dlq: queue is required")
	}
	return nil
}

// Replay sends matching letters back to their consumer's queue (through
// platform.retry with key Q, to Q alone) with the fabric's failure headers cleared
// and the attempt count reset, acking each letter only after the broker
// confirmed its copy. Letters of a type the catalog marks replayable: false
// are left in the DLQ and listed in Report.Refused, and Replay then returns
// a *NotReplayableError naming their types (after replaying the others). A
// dry run only reports what would be replayed and refused. Every call, dry
// or not, writes an audit row.
func (o *Ops) Replay(ctx context.Context, r Request) (Report, error) {
	return o.act(ctx, r, "replay", o.checkReplayable, func(d amqp.Delivery, walk string) error {
		h := amqp.Table{}
		for k, v := range d.Headers {
			if strings.HasPrefix(k, "x-fabric-") || k == "x-death" || strings.HasPrefix(k, "x-first-death") || strings.HasPrefix(k, "x-last-death") || k == "x-delivery-count" {
				continue
			}
			h[k] = v
		}
		h[wire.HeaderReplayedBy] = r.Operator
		h[headerReplayWalk] = walk
		h[wire.HeaderReplayedAt] = o.now().UTC().Format(time.RFC3339)
		pd, err := o.pub.Send(ctx, broker.Message{Exchange: o.spec(r.Queue).RetryExchange(), RoutingKey: r.Queue, Body: d.Body, MessageID: d.MessageId,
			CorrelationID: d.CorrelationId, Type: d.Type, Headers: h, Timestamp: d.Timestamp})
		if err != nil {
			return err
		}
		wctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		defer cancel()
		if err := pd.Wait(wctx); err != nil {
			return err
		}
		return d.Ack(false)
	})
}

// archivedType is the event a letter becomes when retention removes it
// from its DLQ; the data lake keeps it, in the letter's tenant's partition.
const archivedType = "platform.dead-letter-archived.v1"

// errNoTenant: a letter that names no tenant, or two, has no partition in
// the data lake to go to; it stays in the DLQ for an operator.
var errNoTenant = errors.New("the letter names no single tenant: kept for an operator")

// Archive removes from queue's DLQ the letters dead-lettered before
// cutoff, each only after the broker confirmed a platform.dead-letter-
// archived.v1 event carrying it whole (its body, reason, class, error and
// attempts) for producer's data lake: nothing leaves the DLQ that is not
// kept elsewhere. One audit row records the run (operator "retention").
// A letter of no single tenant is kept and counted as failed.
func (o *Ops) Archive(ctx context.Context, queue string, cutoff time.Time, producer string) (Report, error) {
	r := Request{Queue: queue, Filter: Filter{All: true, before: cutoff}, Operator: "retention",
		Reason: "dead-lettered before " + cutoff.UTC().Format(time.RFC3339) + " (RETENTION_DLQ)"}
	return o.act(ctx, r, "archive", nil, func(d amqp.Delivery, _ string) error {
		l := o.letter(queue, d)
		if !l.BelongsTo(l.TenantID) {
			return errNoTenant
		}
		payload := map[string]any{"queue": queue, "messageId": d.MessageId, "type": l.Type, "reason": l.Reason,
			"errorClass": l.ErrorClass, "error": l.Error, "attempts": l.Attempts, "deadLetteredAt": l.LastAttempt}
		if json.Valid(d.Body) {
			payload["letter"] = json.RawMessage(d.Body)
		} else {
			payload["letterBase64"] = d.Body
		}
		e, err := envelope.New(archivedType, l.TenantID, producer, payload)
		if err != nil {
			return err
		}
		if _, err := uuid.Parse(l.CorrelationID); err == nil {
			e.CorrelationID = l.CorrelationID // the archive joins the letter's conversation
		}
		e.Entity = &envelope.Ref{Type: "dead-letter", ID: queue + "/" + d.MessageId}
		wctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		defer cancel()
		if err := o.pub.Publish(wctx, e); err != nil {
			return fmt.Errorf("archive: %w", err)
		}
		return d.Ack(false)
	})
}

// Purge deletes matching letters (acks them without replay), audited.
func (o *Ops) Purge(ctx context.Context, r Request) (Report, error) {
	return o.act(ctx, r, "purge", nil, func(d amqp.Delivery, _ string) error { return d.Ack(false) })
}

// checkReplayable returns an error wrapping ErrNotReplayable, naming the
// type, when the catalog marks d's type replayable: false. Both the AMQP
// type and the envelope's are checked: they agree when the fabric
// published the message, and either one being refused is enough.
func (o *Ops) checkReplayable(d amqp.Delivery) (string, error) {
	types := []string{d.Type}
	if e, err := envelope.Decode(d.Body, 0); err == nil && e.Type != d.Type {
		types = append(types, e.Type)
	}
	for _, typ := range types {
		if def, ok := o.reg.Lookup(typ); ok && !def.Replayable {
			return typ, fmt.Errorf("%w: %s", ErrNotReplayable, typ)
		}
	}
	return "", nil
}

// act walks the DLQ applying apply (which must ack on success) to the
// letters r selects, except those refuse (if set) turns down, then audits.
func (o *Ops) act(ctx context.Context, r Request, action string, refuse func(amqp.Delivery) (string, error),
	apply func(d amqp.Delivery, walk string) error) (Report, error) {
	if err := r.check(); err != nil {
		return Report{}, err
	}
	// A letter replayed by this walk that fails again and comes back while
	// the walk is still running carries the walk's id: leave it for later.
	walk := uuid.NewString()
	rep := Report{Action: action, Queue: r.Queue, DryRun: r.DryRun, Matched: []string{}}
	var refusedTypes []string
	if r.DryRun {
		rep.Action = action + "-dry-run"
	}
	err := o.browse(ctx, r.Queue, func(d amqp.Delivery, i, total int) (bool, error) {
		if r.Progress != nil {
			defer r.Progress(i, total)
		}
		if headerString(d.Headers, headerReplayWalk) == walk {
			return false, nil
		}
		if l := o.letter(r.Queue, d); !r.Filter.matches(l) {
			// A letter named by id but of another tenant than the
			// operator's: refused as "not found", counted as an attempt.
			if r.Filter.Tenant != "" && slices.Contains(r.Filter.IDs, d.MessageId) && !l.BelongsTo(r.Filter.Tenant) {
				security.CrossTenant(ctx, "dlq_letter")
			}
			return false, nil
		}
		if refuse != nil {
			if typ, err := refuse(d); err != nil {
				rep.Refused = append(rep.Refused, d.MessageId)
				rep.Errors = append(rep.Errors, fmt.Sprintf("%s: %v", d.MessageId, err))
				if !slices.Contains(refusedTypes, typ) {
					refusedTypes = append(refusedTypes, typ)
				}
				return false, nil
			}
		}
		rep.Matched = append(rep.Matched, d.MessageId)
		if r.DryRun {
			return false, nil
		}
		if err := apply(d, walk); err != nil {
			rep.Failed++
			rep.Errors = append(rep.Errors, fmt.Sprintf("%s: %v", d.MessageId, err))
			return false, nil
		}
		rep.Succeeded++
		return true, nil
	})
	if !r.DryRun && action != "archive" { // retention's own removals are no operator's mass action
		security.MassAction(ctx, "dlq_"+action, rep.Succeeded)
	}
	var results []string
	if err != nil {
		results = append(results, "aborted: "+err.Error())
	} else if rep.Failed > 0 {
		results = append(results, fmt.Sprintf("%d failed", rep.Failed))
	}
	var refused error
	if len(rep.Refused) > 0 {
		slices.Sort(refusedTypes)
		refused = &NotReplayableError{Types: refusedTypes, IDs: rep.Refused}
		results = append(results, fmt.Sprintf("refused %d not replayable (%s)", len(rep.Refused), strings.Join(refusedTypes, ", ")))
	}
	result := "ok"
	if len(results) > 0 {
		result = strings.Join(results, "; ")
	}
	if action == "archive" && len(rep.Matched) == 0 && err == nil {
		return rep, nil // retention found nothing to do: no audit row every hour for it
	}
	// The audit names the refused letters too: someone asked for them.
	id, aerr := o.writeAudit(context.WithoutCancel(ctx), r, rep, append(slices.Clone(rep.Matched), rep.Refused...), result)
	rep.AuditID = id
	if err != nil {
		return rep, err
	}
	if aerr != nil {
		return rep, aerr
	}
	if refused != nil {
		return rep, refused
	}
	return rep, nil
}

func (o *Ops) writeAudit(ctx context.Context, r Request, rep Report, ids []string, result string) (int64, error) {
	var id int64
	err := o.scoped(ctx, r.Filter.Tenant, func(tx pgx.Tx) error {
		return tx.QueryRow(ctx, fmt.Sprintf(`INSERT INTO %s
			(operator, reason, action, queue, filter, message_ids, succeeded, failed, result, tenant_id)
			VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, NULLIF($10, '')) RETURNING id`, pgx.Identifier{o.auditSchema, "dlq_audit"}.Sanitize()),
			r.Operator, r.Reason, rep.Action, r.Queue, r.Filter.String(), ids, rep.Succeeded, rep.Failed, result, r.Filter.Tenant).Scan(&id)
	})
	if err != nil {
		return 0, fmt.Errorf("dlq: write audit row (the action itself happened): %w", err)
	}
	return id, nil
}

// AuditEntry is one row of dlq_audit.
type AuditEntry struct {
	ID         int64     `json:"id"`
	At         time.Time `json:"at"`
	Operator   string    `json:"operator"`
	Reason     string    `json:"reason"`
	Action     string    `json:"action"`
	Queue      string    `json:"queue"`
	Filter     string    `json:"filter"`
	MessageIDs []string  `json:"messageIds"`
	Succeeded  int       `json:"succeeded"`
	Failed     int       `json:"failed"`
	Result     string    `json:"result"`
	// TenantID is the tenant the operation was confined to (Filter.Tenant:
	// the operator's tenant over HTTP); empty for a platform-wide one.
	TenantID string `json:"tenantId,omitempty"`
}

// Audit returns the latest limit audit rows for queue (all queues when
// empty), of every tenant: for platform operators (fabricctl).
func (o *Ops) Audit(ctx context.Context, queue string, limit int) ([]AuditEntry, error) {
	return o.auditRows(ctx, "", `($1 = '' OR queue = $1)`, limit, queue)
}

// scoped runs fn in a transaction that row-level security confines to
// tenantID, or in platform scope for a platform-wide operation (empty).
func (o *Ops) scoped(ctx context.Context, tenantID string, fn func(pgx.Tx) error) error {
	if tenantID == "" {
		return crosstenant.Tx(ctx, o.audit, fn)
	}
	return tenant.Tx(ctx, o.audit, tenantID, fn)
}

// ErrNoTenant: a tenant-scoped operation was asked for without a tenant.
var ErrNoTenant = errors.New("dlq: a tenant is required")

// TenantAudit returns the latest limit audit rows of operations confined
// to tenant on any of queues: what an operator of that tenant may see.
// Rows of platform-wide operations (no tenant) are not among them, since
// they name other tenants' letters.
func (o *Ops) TenantAudit(ctx context.Context, tenant string, queues []string, limit int) ([]AuditEntry, error) {
	if tenant == "" {
		return nil, ErrNoTenant
	}
	return o.auditRows(ctx, tenant, `tenant_id = $1 AND queue = ANY ($2)`, limit, tenant, queues)
}

func (o *Ops) auditRows(ctx context.Context, tenantID, where string, limit int, args ...any) ([]AuditEntry, error) {
	args = append(args, limit)
	var entries []AuditEntry
	err := o.scoped(ctx, tenantID, func(tx pgx.Tx) error {
		rows, err := tx.Query(ctx, fmt.Sprintf(`SELECT id, at, coalesce(tenant_id, ''), operator, reason, action, queue, filter, message_ids, succeeded, failed, result
			FROM %s WHERE %s ORDER BY id DESC LIMIT $%d`, pgx.Identifier{o.auditSchema, "dlq_audit"}.Sanitize(), where, len(args)), args...)
		if err != nil {
			return err
		}
		entries, err = pgx.CollectRows(rows, func(r pgx.CollectableRow) (AuditEntry, error) {
			var a AuditEntry
			err := r.Scan(&a.ID, &a.At, &a.TenantID, &a.Operator, &a.Reason, &a.Action, &a.Queue, &a.Filter, &a.MessageIDs, &a.Succeeded, &a.Failed, &a.Result)
			return a, err
		})
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("dlq audit: %w", err)
	}
	return entries, nil
}
