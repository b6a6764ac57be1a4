package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"mime/multipart"
	"os"
	"strings"
	"time"

	"github.com/agora-platform/agora/pkg/fabric/gateway"
	"github.com/agora-platform/agora/pkg/fabric/gateway/signature"
	"github.com/agora-platform/agora/services/document-worker/doctest"
)

// The reactive fabric's two slices (seed 004 §87-88) on the platform of
// `make up`, each decision printed with its reason:
//   - resume: a request of segunda-via-rg waits at its document check
//     (definition document-verification); the worker's verdict on an
//     uploaded document (document.validated.v1) meets a subscription whose
//     policy denies documents of another kind and allows an identity
//     document, which resumes the step;
//   - mass reaction: the tenant's catalog system says, through the gateway,
//     that alvara-funcionamento now requires another document; a
//     subscription would review every open request of it, which is above
//     its limit, so an operator approves with the estimate in hand and the
//     job reviews them in batches.
const (
	resumeSubscription = "demo: resume the document check"
	massSubscription   = "demo: review the requests of a changed service"
)

// subscriptionSpecs are the two subscriptions the demo keeps active in its
// tenant (created on the first run, reused after).
var subscriptionSpecs = map[string]string{
	resumeSubscription: `{"name":"` + resumeSubscription + `","eventTypes":["document.validated.v1"],
		"filter":"payload.valid == true","policy":{"default":"ALLOW","rules":[{"when":"payload.kind != \"identity\"","outcome":"DENY"}]},
		"reaction":{"kind":"resume-workflow"}}`,
	massSubscription: `{"name":"` + massSubscription + `","eventTypes":["catalog.service-updated.v1"],
		"filter":"payload.change == \"requires-document\"","policy":{"default":"ALLOW"},
		"reaction":{"kind":"review-affected-requests","role":"attendant","maxAffected":2}}`,
}

var errNotSeen = errors.New("a step of the slice was not seen (see NOT SEEN above, and .data/logs)")

type decision struct {
	EventType           string `json:"eventType"`
	SubscriptionID      string `json:"subscriptionId"`
	SubscriptionVersion int    `json:"subscriptionVersion"`
	Outcome             string `json:"outcome"`
	Rule                *int   `json:"rule"`
	ActorType           string `json:"actorType"`
	Status              string `json:"status"`
	Detail              string `json:"detail"`
	ReviewID            string `json:"reviewId"`
	Reviews             []struct {
		Kind, Status, Resolution, ResolvedBy, Reason, Note string
	} `json:"reviews"`
	Job *struct {
		Total, Done int
		Status      string
	} `json:"job"`
}

func (d decision) String() string {
	rule := "no policy rule matched"
	if d.Rule != nil {
		rule = fmt.Sprintf("policy rule %d", *d.Rule)
	}
	s := fmt.Sprintf("%s on %s (subscription %s v%d, %s, actor %s): %s, %s", d.Outcome, d.EventType, d.SubscriptionID[:8],
		d.SubscriptionVersion, rule, d.ActorType, d.Status, d.Detail)
	for _, r := range d.Reviews {
		if r.Resolution != "" {
			s += fmt.Sprintf("\n            %s %s by %s: %q", r.Kind, r.Resolution, r.ResolvedBy, r.Reason)
		}
	}
	if d.Job != nil {
		s += fmt.Sprintf("\n            job %s: %d of %d requests reviewed", d.Job.Status, d.Job.Done, d.Job.Total)
	}
	return s
}

func (d *demo) reactive(ctx context.Context, operator, sourcesFile string) error {
	for _, name := range []string{resumeSubscription, massSubscription} {
		if err := d.ensureSubscription(ctx, operator, name); err != nil {
			return err
		}
	}

	// Slice 1: resume.
	id, correlation, err := d.submit(ctx, "segunda-via-rg")
	if err != nil {
		return err
	}
	d.say("request: submitted %s for segunda-via-rg", id)
	if !d.wait(ctx, "workflow: the process waits at its document check (waitFor document.validated.v1)", func() (string, bool) {
		return d.process(ctx, id)
	}) {
		return errNotSeen
	}
	if err := d.upload(ctx, id, "comprovante.png", []string{"Comprovante de residência", "Endereço: rua das Flores, 120",
		"CEP 01000-000, conta de luz de março"}); err != nil {
		return err
	}
	d.say("request: uploaded a proof of address")
	if !d.decisions(ctx, correlation, "the worker's verdict on it: the policy denies another kind of document", func(ds []decision) bool {
		return has(ds, "DENY")
	}) {
		return errNotSeen
	}
	if err := d.upload(ctx, id, "rg.png", []string{"Carteira de Identidade", "Registro Geral 12.345.678-9",
		"Nome: Maria da Silva", "CPF 123.456.789-00"}); err != nil {
		return err
	}
	d.say("request: uploaded an identity document")
	if !d.decisions(ctx, correlation, "the worker's verdict on it: allowed, the step resumed", func(ds []decision) bool {
		return has(ds, "ALLOW")
	}) {
		return errNotSeen
	}
	if !d.wait(ctx, "workflow: the process moved past its document check", func() (string, bool) {
		s, _ := d.process(ctx, id)
		return s, strings.Contains(s, `"currentStep":1`)
	}) {
		return errNotSeen
	}

	// Slice 2: a mass reaction behind the blast-radius gate.
	for range 3 {
		if _, _, err := d.submit(ctx, "alvara-funcionamento"); err != nil {
			return err
		}
	}
	d.say("request: 3 more requests of alvara-funcionamento (the subscription's limit is 2)")
	eventID, err := d.serviceChanged(ctx, sourcesFile)
	if err != nil {
		return err
	}
	d.say("gateway: the catalog system's signed CloudEvent accepted as %s (catalog.service-updated.v1)", eventID)
	var gated decision
	if !d.wait(ctx, "workflow: the decision waits for an operator, with the estimate", func() (string, bool) {
		ds, err := d.decisionsOf(ctx, "eventId="+eventID)
		if err != nil || len(ds) == 0 {
			return fmt.Sprint(err), false
		}
		gated = ds[0]
		return gated.String(), gated.Status == "pending-approval"
	}) {
		return errNotSeen
	}
	if gated.ReviewID == "" {
		return fmt.Errorf("the gated decision has no approval to resolve")
	}
	body := `{"approve":true,"reason":"the new document applies to every open request"}`
	if _, err := d.call(ctx, "POST", "workflow", "/v1/reviews/"+gated.ReviewID+"/resolve", operator, strings.NewReader(body), nil); err != nil {
		return fmt.Errorf("approve: %w", err)
	}
	d.say("operator: approved")
	if !d.wait(ctx, "workflow: the job reviewed each open request once, in batches", func() (string, bool) {
		ds, err := d.decisionsOf(ctx, "eventId="+eventID)
		if err != nil || len(ds) == 0 {
			return fmt.Sprint(err), false
		}
		return ds[0].String(), ds[0].Job != nil && ds[0].Job.Status == "done"
	}) {
		return errNotSeen
	}
	d.say("done in %s (why the platform did each thing: GET /v1/decisions?correlationId=…, or `fabricctl explain TYPE`)",
		time.Since(d.start).Round(time.Millisecond))
	return nil
}

// ensureSubscription creates the named subscription and takes it to
// ACTIVE (written by the attendant, approved by the operator: four eyes),
// unless the tenant already has it active.
func (d *demo) ensureSubscription(ctx context.Context, operator, name string) error {
	var list []struct {
		ID, Name, State string
	}
	if _, err := d.call(ctx, "GET", "workflow", "/v1/subscriptions", d.attendant, nil, &list); err != nil {
		return fmt.Errorf("list subscriptions: %w", err)
	}
	for _, s := range list {
		if s.Name == name && s.State == "ACTIVE" {
			d.say("workflow: subscription %q is active (%s)", name, s.ID)
			return nil
		}
	}
	var created struct{ ID string }
	if _, err := d.call(ctx, "POST", "workflow", "/v1/subscriptions", d.attendant, strings.NewReader(subscriptionSpecs[name]), &created); err != nil {
		return fmt.Errorf("create subscription %q: %w", name, err)
	}
	for _, to := range []string{"VALIDATING", "APPROVED", "ACTIVE"} {
		body := `{"to":"` + to + `","reason":"make demo-reactive"}`
		if _, err := d.call(ctx, "POST", "workflow", "/v1/subscriptions/"+created.ID+"/versions/1/transitions", operator,
			strings.NewReader(body), nil); err != nil {
			return fmt.Errorf("subscription %q → %s: %w", name, to, err)
		}
	}
	d.say("workflow: subscription %q written by the attendant, validated, approved and activated by the operator (%s)", name, created.ID)
	return nil
}

// submit files a request of service as the demo's citizen and returns its
// id and correlation id.
func (d *demo) submit(ctx context.Context, service string) (string, string, error) {
	body := `{"serviceId":"` + service + `","formId":"demo-form","formVersion":1,"channel":"web","fields":{}}`
	var receipt map[string]any
	if _, err := d.call(ctx, "POST", "request", "/v1/requests", d.citizen, strings.NewReader(body), &receipt); err != nil {
		return "", "", fmt.Errorf("submit %s: %w", service, err)
	}
	id, _ := receipt["id"].(string)
	var req map[string]any
	if _, err := d.call(ctx, "GET", "request", "/v1/requests/"+id, d.citizen, nil, &req); err != nil {
		return "", "", fmt.Errorf("read request %s: %w", id, err)
	}
	correlation, _ := req["correlationId"].(string)
	return id, correlation, nil
}

func (d *demo) process(ctx context.Context, requestID string) (string, bool) {
	var page struct {
		Processes []map[string]any `json:"processes"`
	}
	if _, err := d.call(ctx, "GET", "workflow", "/v1/processes?requestId="+requestID, d.attendant, nil, &page); err != nil {
		return err.Error(), false
	}
	procs := page.Processes
	if len(procs) == 0 {
		return "no process yet", false
	}
	return compact(map[string]any{"definitionId": procs[0]["definitionId"], "currentStep": procs[0]["currentStep"],
		"status": procs[0]["status"]}), true
}

func (d *demo) upload(ctx context.Context, requestID, name string, lines []string) error {
	png, err := doctest.PNG(lines, 36)
	if err != nil {
		return err
	}
	var buf bytes.Buffer
	mw := multipart.NewWriter(&buf)
	fw, err := mw.CreateFormFile("file", name)
	if err != nil {
		return err
	}
	if _, err := fw.Write(png); err != nil {
		return err
	}
	if err := mw.Close(); err != nil {
		return err
	}
	if _, err := d.callH(ctx, "POST", "request", "/v1/requests/"+requestID+"/documents", d.citizen, &buf,
		map[string]string{"Content-Type": mw.FormDataContentType()}, nil); err != nil {
		return fmt.Errorf("upload %s: %w", name, err)
	}
	return nil
}

func (d *demo) decisionsOf(ctx context.Context, query string) ([]decision, error) {
	var ds []decision
	_, err := d.call(ctx, "GET", "workflow", "/v1/decisions?"+query, d.attendant, nil, &ds)
	return ds, err
}

// decisions waits until the request's decisions satisfy done and prints
// the newest.
func (d *demo) decisions(ctx context.Context, correlation, what string, done func([]decision) bool) bool {
	return d.wait(ctx, "workflow: "+what, func() (string, bool) {
		ds, err := d.decisionsOf(ctx, "correlationId="+correlation)
		if err != nil {
			return err.Error(), false
		}
		if !done(ds) {
			return fmt.Sprintf("%d decisions so far", len(ds)), false
		}
		return ds[len(ds)-1].String(), true
	})
}

func has(ds []decision, outcome string) bool {
	for _, d := range ds {
		if d.Outcome == outcome {
			return true
		}
	}
	return false
}

// serviceChanged sends, as the tenant's catalog system registered by
// `make up` (.data/gateway/sources.json), a signed CloudEvent saying
// alvara-funcionamento now requires another document.
func (d *demo) serviceChanged(ctx context.Context, sourcesFile string) (string, error) {
	data, err := os.ReadFile(sourcesFile)
	if err != nil {
		return "", fmt.Errorf("the gateway's sources (start the platform with `make up`): %w", err)
	}
	var sources []struct{ ID, URI, Secret string }
	if err := json.Unmarshal(data, &sources); err != nil || len(sources) == 0 {
		return "", fmt.Errorf("%s: no source (%v)", sourcesFile, err)
	}
	src := sources[0]
	body, err := json.Marshal(map[string]any{"specversion": "1.0", "id": "demo-" + randHex(6), "source": src.URI,
		"type": "catalog.service-updated.v1", "data": map[string]any{"serviceId": "alvara-funcionamento",
			"change": "requires-document", "requiredDocument": "laudo do corpo de bombeiros"}})
	if err != nil {
		return "", err
	}
	var accepted struct {
		EventID string `json:"eventId"`
	}
	if _, err := d.callH(ctx, "POST", "request", gateway.Path, "", bytes.NewReader(body), map[string]string{
		"Content-Type": signature.ContentType, signature.Header: signature.Sign(src.Secret, time.Now(), body)}, &accepted); err != nil {
		return "", fmt.Errorf("gateway: %w", err)
	}
	return accepted.EventID, nil
}
