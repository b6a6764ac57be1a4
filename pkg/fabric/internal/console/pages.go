package console

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/agora-platform/agora/pkg/fabric/internal/dlq"
	"github.com/agora-platform/agora/pkg/fabric/internal/ops"
)

// serviceStatus is one service's row group on the overview.
type serviceStatus struct {
	Service string
	Status  ops.Status
	Err     string
}

func (c *console) overview(w http.ResponseWriter, r *http.Request, op operator) {
	ctx, cancel := ctxOf(r)
	defer cancel()
	rows := make([]serviceStatus, len(c.Targets))
	c.eachTarget(func(i int, t Target) {
		rows[i].Service = t.Name
		if err := c.get(ctx, op, t, ops.PathPrefix+"status", &rows[i].Status); err != nil {
			rows[i].Err = err.Error()
		}
	})
	data := op.page("Overview")
	data["Services"] = rows
	c.render(w, http.StatusOK, "overview", data)
}

// queuePage resolves the {service} and {queue} of a DLQ page, answering
// 404 for a service the console does not know.
func (c *console) queuePage(w http.ResponseWriter, r *http.Request, op operator) (Target, string, bool) {
	t, ok := c.target(r.PathValue("service"))
	if !ok {
		data := op.page("Not found")
		data["Error"] = fmt.Sprintf("The console asks no service named %q.", r.PathValue("service"))
		c.render(w, http.StatusNotFound, "overview", data)
		return t, "", false
	}
	return t, r.PathValue("queue"), true
}

func (c *console) deadLetters(w http.ResponseWriter, r *http.Request, op operator) {
	t, queue, ok := c.queuePage(w, r, op)
	if !ok {
		return
	}
	ctx, cancel := ctxOf(r)
	defer cancel()
	data := op.page("Dead letters of " + queue)
	data["Service"], data["Queue"] = t.Name, queue
	var letters []dlq.Letter
	if err := c.get(ctx, op, t, dlq.PathPrefix+escape(queue), &letters); err != nil {
		data["Error"] = err.Error()
		c.render(w, statusOf(err), "dlq", data)
		return
	}
	var audit []dlq.AuditEntry
	if err := c.get(ctx, op, t, dlq.PathPrefix+"audit", &audit); err != nil {
		data["AuditError"] = err.Error()
	}
	audit = slices.DeleteFunc(audit, func(a dlq.AuditEntry) bool { return a.Queue != queue })
	data["Letters"], data["Audit"] = letters, audit
	c.render(w, http.StatusOK, "dlq", data)
}

func (c *console) letter(w http.ResponseWriter, r *http.Request, op operator) {
	t, queue, ok := c.queuePage(w, r, op)
	if !ok {
		return
	}
	ctx, cancel := ctxOf(r)
	defer cancel()
	data := op.page("Dead letter " + r.PathValue("id"))
	data["Service"], data["Queue"] = t.Name, queue
	var l dlq.Letter
	if err := c.get(ctx, op, t, dlq.PathPrefix+escape(queue)+"/letters/"+escape(r.PathValue("id")), &l); err != nil {
		data["Error"] = err.Error()
		c.render(w, statusOf(err), "letter", data)
		return
	}
	pretty, _ := json.MarshalIndent(l, "", "  ")
	data["Letter"], data["JSON"] = l, string(pretty)
	c.render(w, http.StatusOK, "letter", data)
}

// act runs a replay or purge on the selected letters, showing the
// service's progress lines as they come, then its report: the page is
// written as the stream arrives, so a long walk shows its count, rate and
// ETA without any script.
func (c *console) act(w http.ResponseWriter, r *http.Request, op operator) {
	t, queue, ok := c.queuePage(w, r, op)
	if !ok {
		return
	}
	action := r.PostFormValue("action")
	ids := r.PostForm["id"]
	reason := strings.TrimSpace(r.PostFormValue("reason"))
	dryRun := r.PostFormValue("dryRun") != ""
	data := op.page(fmt.Sprintf("%s on %s", action, queue))
	data["Service"], data["Queue"], data["Action"], data["DryRun"], data["IDs"], data["Reason"] = t.Name, queue, action, dryRun, ids, reason
	var problems []string
	if action != "replay" && action != "purge" {
		problems = append(problems, "choose replay or purge")
	}
	if len(ids) == 0 {
		problems = append(problems, "select at least one letter")
	}
	if reason == "" {
		problems = append(problems, "give a reason (it goes in the audit)")
	}
	if len(problems) > 0 {
		data["Error"] = "Nothing was done: " + strings.Join(problems, "; ") + "."
		c.render(w, http.StatusUnprocessableEntity, "action", data)
		return
	}
	body := map[string]any{"filter": map[string]any{"ids": ids}, "reason": reason, "dryRun": dryRun}
	req, err := c.request(r.Context(), op, t, http.MethodPost, dlq.PathPrefix+escape(queue)+"/"+action, body)
	if err != nil {
		data["Error"] = err.Error()
		c.render(w, http.StatusInternalServerError, "action", data)
		return
	}
	req.Header.Set("Accept", dlq.StreamType+", application/json;q=0.5")
	// A walk of a large DLQ outlasts the pages' timeout: this call ends
	// with the operator's request (its context) instead.
	long := &http.Client{Transport: c.Client.Transport}
	resp, err := long.Do(req)
	if err != nil {
		data["Error"] = (&callError{Service: t.Name, Detail: "unreachable: " + err.Error()}).Error()
		c.render(w, http.StatusBadGateway, "action", data)
		return
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK || !strings.HasPrefix(resp.Header.Get("Content-Type"), dlq.StreamType) {
		// Refused before it began (no stream): a problem.
		var buf strings.Builder
		_, _ = bufio.NewReader(resp.Body).WriteTo(&buf)
		data["Error"] = refusal(t.Name, resp.StatusCode, []byte(buf.String())).Error()
		c.render(w, statusOf(&callError{Status: resp.StatusCode}), "action", data)
		return
	}
	// The head of the page first, then one progress line at a time, then
	// the outcome (the template's three parts).
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	tpl := c.pages["action"]
	flush := func() {
		if f, ok := w.(http.Flusher); ok {
			f.Flush()
		}
	}
	_ = tpl.ExecuteTemplate(w, "head", data)
	flush()
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 0, 64<<10), 4<<20)
	var result *dlq.Result
	for sc.Scan() {
		var line dlq.StreamLine
		if err := json.Unmarshal(sc.Bytes(), &line); err != nil {
			continue
		}
		if line.Progress != nil {
			_ = tpl.ExecuteTemplate(w, "progress", line.Progress)
			flush()
		}
		if line.Result != nil {
			result = line.Result
		}
	}
	out := map[string]any{"Service": t.Name, "Queue": queue, "Action": action}
	switch {
	case result == nil:
		out["Error"] = fmt.Sprintf("%s ended the stream without a result (%v): check the audit before retrying", t.Name, sc.Err())
	case result.Status == http.StatusOK:
		var rep dlq.Report
		if err := json.Unmarshal(result.Body, &rep); err != nil {
			out["Error"] = "an unreadable report: " + err.Error()
		} else {
			out["Report"] = rep
		}
	default:
		out["Error"] = refusal(t.Name, result.Status, result.Body).Error()
	}
	_ = tpl.ExecuteTemplate(w, "outcome", out)
}

// node is one event of a journey, with what became of it.
type node struct {
	ops.Emitted
	Service     string
	Consumed    []consumption
	DeadLetters []deadLetter
	Lineage     *lineage
	Children    []*node
}

type consumption struct {
	Service string
	ops.Consumed
}

type deadLetter struct {
	Service string
	dlq.Letter
}

// lineage is the data lake's record of an event (datalake-ingestion's
// GET /v1/lineage/{eventId}); only the fields the page shows.
type lineage struct {
	Bucket     string    `json:"bucket"`
	ObjectKey  string    `json:"objectKey"`
	RowOffset  int       `json:"rowOffset"`
	IngestedAt time.Time `json:"ingestedAt"`
}

// lineageService is the service whose lineage the journey shows.
const lineageService = "datalake-ingestion"

func (c *console) journey(w http.ResponseWriter, r *http.Request, op operator) {
	id := strings.TrimSpace(r.URL.Query().Get("correlationId"))
	data := op.page("Journey")
	data["CorrelationID"] = id
	if id == "" {
		c.render(w, http.StatusOK, "journey", data)
		return
	}
	ctx, cancel := ctxOf(r)
	defer cancel()
	parts := make([]ops.Journey, len(c.Targets))
	errs := make([]string, len(c.Targets))
	c.eachTarget(func(i int, t Target) {
		if err := c.get(ctx, op, t, ops.PathPrefix+"journeys/"+escape(id), &parts[i]); err != nil {
			errs[i] = err.Error()
		}
		parts[i].Service = t.Name
	})
	roots, orphans := tree(parts)
	if lt, ok := c.target(lineageService); ok {
		c.lineage(ctx, op, lt, roots)
	}
	data["Roots"], data["Orphans"], data["Errors"] = roots, orphans, slices.DeleteFunc(errs, func(s string) bool { return s == "" })
	data["Empty"] = len(roots) == 0 && len(orphans) == 0
	c.render(w, http.StatusOK, "journey", data)
}

// tree joins the services' parts of a journey: each emitted event under
// the event that caused it, with the consumers that committed it and its
// dead letters. What was consumed or dead-lettered but emitted by no
// service the console asks (a gateway's event, a replay) is an orphan.
func tree(parts []ops.Journey) (roots []*node, orphans []*node) {
	byID := map[string]*node{}
	var all []*node
	for _, p := range parts {
		for _, e := range p.Emitted {
			n := &node{Emitted: e, Service: p.Service}
			byID[e.ID] = n
			all = append(all, n)
		}
	}
	orphan := func(id, typ string) *node {
		if n, ok := byID[id]; ok {
			return n
		}
		n := &node{Emitted: ops.Emitted{ID: id, Type: typ}}
		byID[id] = n
		orphans = append(orphans, n)
		return n
	}
	for _, p := range parts {
		for _, cns := range p.Consumed {
			n := orphan(cns.EventID, cns.EventType)
			n.Consumed = append(n.Consumed, consumption{Service: p.Service, Consumed: cns})
		}
		for _, l := range p.DeadLetters {
			n := orphan(l.MessageID, l.Type)
			n.DeadLetters = append(n.DeadLetters, deadLetter{Service: p.Service, Letter: l})
		}
	}
	sort.SliceStable(all, func(i, j int) bool { return all[i].OccurredAt.Before(all[j].OccurredAt) })
	for _, n := range all {
		if parent, ok := byID[n.CausationID]; ok && n.CausationID != "" && parent != n {
			parent.Children = append(parent.Children, n)
		} else {
			roots = append(roots, n)
		}
	}
	return roots, orphans
}

// lineage fills in the data lake's record of every event in the tree.
func (c *console) lineage(ctx context.Context, op operator, t Target, roots []*node) {
	var walk func([]*node)
	walk = func(ns []*node) {
		for _, n := range ns {
			var l lineage
			if err := c.get(ctx, op, t, "/v1/lineage/"+escape(n.ID), &l); err == nil {
				n.Lineage = &l
			}
			walk(n.Children)
		}
	}
	walk(roots)
}

// statusOf is the status a page answers for a failed call: the service's
// own 4xx (not found, forbidden), else 502.
func statusOf(err error) int {
	var ce *callError
	if errors.As(err, &ce) && ce.Status >= 400 && ce.Status < 500 {
		return ce.Status
	}
	return http.StatusBadGateway
}
