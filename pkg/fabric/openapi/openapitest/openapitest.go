// Package openapitest checks real HTTP exchanges against a service's
// OpenAPI 3.1 document (github.com/pb33f/libopenapi-validator), so a
// document that drifts from its handlers fails the tests that call them.
//
// A Validator holds one document. Its Check judges one request and its
// response:
//
//   - the path and method must be a documented operation, and the
//     response's status, media type, body and documented headers what the
//     operation says for that status;
//   - a request the service accepted (status below 400) must itself match
//     the document: parameters, body, media type, security. A refused
//     request is not checked, since tests send wrong input on purpose;
//   - a path or method the document does not have may only be answered 404
//     or 405 with a problem body (the routers' answer to what they do not
//     serve), a path also 400 with a problem body (the host refuses a NUL or
//     invalid UTF-8 before routing), or by the HTTP mux's redirect to the
//     canonical path; HEAD on a documented GET may answer any status the GET
//     documents, with no body.
//
// A Transport applies Check to every exchange of an http.Client with the
// services registered with it; the other hosts it passes through:
//
//	tr := openapitest.NewTransport(http.DefaultTransport)
//	if err := tr.AddService(ctx, baseURL); err != nil { … } // fetches baseURL/openapi.json
//	client := &http.Client{Transport: tr}
//	… // every call to baseURL is checked; a mismatch is the call's error
//	if err := tr.Err(); err != nil { t.Error(err) } // every mismatch so far
package openapitest

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"os"
	"path"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/pb33f/libopenapi"
	validator "github.com/pb33f/libopenapi-validator"
	"github.com/pb33f/libopenapi-validator/config"
	vErrors "github.com/pb33f/libopenapi-validator/errors"
	"github.com/pb33f/libopenapi-validator/paths"
	"github.com/pb33f/libopenapi-validator/radix"
	"github.com/pb33f/libopenapi-validator/router"
	"github.com/pb33f/libopenapi-validator/schema_validation"
	"github.com/pb33f/libopenapi/datamodel"
	"github.com/pb33f/libopenapi/datamodel/high/base"
	v3 "github.com/pb33f/libopenapi/datamodel/high/v3"

	"github.com/agora-platform/agora/pkg/fabric/openapi"
)

// Validator checks exchanges against one OpenAPI 3.1 document. It is safe
// for concurrent use.
type Validator struct {
	model   *v3.Document
	routes  *config.ValidationOptions // the validator's own route resolution
	ops     []openapi.Operation
	problem *base.Schema

	mu      sync.Mutex // the library's validators are not documented as concurrency-safe
	v       validator.Validator
	schemas schema_validation.SchemaValidator
}

// New builds a validator for doc (JSON or YAML). It fails unless doc is an
// OpenAPI 3.1 document whose model builds without errors (every $ref
// resolves), that is valid against the OpenAPI 3.1 schema, whose objects
// hold no key OpenAPI 3.1 does not define (see strayKeys), and that has a
// components.schemas.Problem.
func New(doc []byte) (*Validator, error) {
	cfg := datamodel.NewDocumentConfiguration()
	cfg.Logger = slog.New(slog.DiscardHandler) // what it would log, BuildV3Model returns
	d, err := libopenapi.NewDocumentWithConfiguration(doc, cfg)
	if err != nil {
		return nil, fmt.Errorf("openapitest: parse the document: %w", err)
	}
	if v := d.GetVersion(); !strings.HasPrefix(v, "3.1.") {
		return nil, fmt.Errorf("openapitest: the document is OpenAPI %q, want 3.1.x", v)
	}
	m, err := d.BuildV3Model()
	if err != nil {
		return nil, fmt.Errorf("openapitest: build the document's model: %w", err)
	}
	v, errs := validator.NewValidator(d, config.WithFormatAssertions())
	if len(errs) > 0 {
		return nil, fmt.Errorf("openapitest: build the validator: %w", errors.Join(errs...))
	}
	if ok, verrs := v.ValidateDocument(); !ok {
		return nil, fmt.Errorf("openapitest: the document is not valid OpenAPI 3.1:\n%s", describe(verrs))
	}
	if stray, err := strayKeys(doc); err != nil {
		return nil, fmt.Errorf("openapitest: read the document: %w", err)
	} else if len(stray) > 0 {
		return nil, fmt.Errorf("openapitest: keys OpenAPI 3.1 does not define (a flow-style YAML description cut at a comma?):\n  %s",
			strings.Join(stray, "\n  "))
	}
	var problem *base.Schema
	if m.Model.Components != nil && m.Model.Components.Schemas != nil {
		if p := m.Model.Components.Schemas.GetOrZero("Problem"); p != nil {
			problem = p.Schema()
		}
	}
	if problem == nil {
		return nil, errors.New("openapitest: the document has no components.schemas.Problem")
	}
	ops, err := openapi.Operations(doc)
	if err != nil {
		return nil, err
	}
	// Routes are resolved as the validator resolves them (a radix tree of
	// the paths, the server ignored), so that Check and it never disagree
	// on which operation a request is.
	routes := config.NewValidationOptions()
	routes.Router = router.NewRouter(&m.Model, router.WithPathLookup(radix.BuildPathTree(&m.Model)), router.WithPathOnlyMatching())
	return &Validator{model: &m.Model, routes: routes, ops: ops, problem: problem, v: v,
		schemas: schema_validation.NewSchemaValidator(config.WithFormatAssertions())}, nil
}

// operations returns the document's operations, sorted by path then method.
func (v *Validator) operations() []openapi.Operation { return slices.Clone(v.ops) }

// mismatchError is an exchange the document does not describe.
type mismatchError struct {
	Method, URL string
	Status      int
	Problems    []string
}

func (e *mismatchError) Error() string {
	return fmt.Sprintf("openapi: %s %s answered %d, which the document does not describe:\n  %s",
		e.Method, e.URL, e.Status, strings.Join(e.Problems, "\n  "))
}

// Check judges one exchange (see the package comment): nil, or a
// *mismatchError. reqBody is the request's body as sent (nil for none);
// req.Body and resp.Body are not read: resp's body is respBody.
func (v *Validator) Check(req *http.Request, reqBody []byte, resp *http.Response, respBody []byte) error {
	var problems []string
	fail := func(format string, a ...any) { problems = append(problems, fmt.Sprintf(format, a...)) }
	// Fresh copies: the library reads both bodies.
	req = req.Clone(req.Context())
	req.Body = io.NopCloser(bytes.NewReader(reqBody))
	r := *resp
	r.Body = io.NopCloser(bytes.NewReader(respBody))
	resp = &r

	v.mu.Lock()
	defer v.mu.Unlock()
	if canonicalRedirect(req, resp) {
		return nil
	}
	lookup := req
	if req.Method == http.MethodHead {
		// The route of a HEAD without an operation of its own is GET's.
		lookup = req.Clone(req.Context())
		lookup.Method = http.MethodGet
	}
	item, _, template := paths.FindPath(lookup, v.model, v.routes)
	if item != nil && strings.HasSuffix(req.URL.Path, "/") != strings.HasSuffix(template, "/") {
		item = nil // the library ignores a trailing slash; the routers do not
	}
	var op *v3.Operation
	if item != nil {
		op = operation(item, req.Method)
	}
	switch {
	case op != nil && resp.StatusCode < 400:
		if ok, errs := v.v.ValidateHttpRequestResponse(req, resp); !ok {
			fail("%s", describe(errs))
		}
	case op != nil:
		if ok, errs := v.v.ValidateHttpResponse(req, resp); !ok {
			fail("%s", describe(errs))
		}
	case resp.StatusCode == http.StatusNotFound || resp.StatusCode == http.StatusMethodNotAllowed ||
		(item == nil && resp.StatusCode == http.StatusBadRequest):
		// What is not served: the routers' problem answer, or the
		// host's refusal of a path holding a NUL or invalid UTF-8,
		// before any routing (package edge).
		if err := v.checkProblem(req.Method, resp, respBody); err != nil {
			fail("undocumented %s %s: %v", req.Method, req.URL.Path, err)
		}
	case req.Method == http.MethodHead && item != nil && item.Get != nil:
		if !documents(item.Get, resp.StatusCode) {
			fail("HEAD answered %d, a status GET does not document", resp.StatusCode)
		}
	case item == nil:
		fail("the path is not in the document, yet it was answered %d (only 400, 404 or 405 with a problem body may be)", resp.StatusCode)
	default:
		fail("the document has no %s operation on this path, yet it was answered %d (only 404 or 405 with a problem body may be)", req.Method, resp.StatusCode)
	}
	if len(problems) == 0 {
		return nil
	}
	return &mismatchError{Method: req.Method, URL: req.URL.String(), Status: resp.StatusCode, Problems: problems}
}

// checkProblem reports whether resp is an RFC 9457 problem of its status,
// valid against the document's Problem schema.
func (v *Validator) checkProblem(method string, resp *http.Response, body []byte) error {
	if mt := strings.TrimSpace(strings.Split(resp.Header.Get("Content-Type"), ";")[0]); mt != "application/problem+json" {
		return fmt.Errorf("Content-Type %q, want application/problem+json", resp.Header.Get("Content-Type"))
	}
	if method == http.MethodHead {
		return nil // no body
	}
	if ok, errs := v.schemas.ValidateSchemaBytes(v.problem, body); !ok {
		return fmt.Errorf("not a Problem: %s", describe(errs))
	}
	var p struct {
		Status int `json:"status"`
	}
	if err := json.Unmarshal(body, &p); err != nil || p.Status != resp.StatusCode {
		return fmt.Errorf("problem status %d in a %d answer", p.Status, resp.StatusCode)
	}
	return nil
}

// canonicalRedirect reports whether resp is net/http's ServeMux sending
// the client (307 since Go 1.22, 301 before) to the canonical form of the path (cleaned of "." and ".."
// and duplicate slashes, or with the slash a subtree pattern ends with): an
// answer of the mux, not of any route.
func canonicalRedirect(req *http.Request, resp *http.Response) bool {
	switch resp.StatusCode {
	case http.StatusMovedPermanently, http.StatusTemporaryRedirect, http.StatusPermanentRedirect:
	default:
		return false
	}
	loc, err := url.Parse(resp.Header.Get("Location"))
	if err != nil {
		return false
	}
	p := req.URL.Path
	clean := path.Clean(p)
	if strings.HasSuffix(p, "/") && clean != "/" {
		clean += "/"
	}
	return (clean != p && loc.Path == clean) || loc.Path == p+"/"
}

func operation(item *v3.PathItem, method string) *v3.Operation {
	switch method {
	case http.MethodGet:
		return item.Get
	case http.MethodPut:
		return item.Put
	case http.MethodPost:
		return item.Post
	case http.MethodDelete:
		return item.Delete
	case http.MethodOptions:
		return item.Options
	case http.MethodHead:
		return item.Head
	case http.MethodPatch:
		return item.Patch
	case http.MethodTrace:
		return item.Trace
	}
	return nil
}

// documents reports whether op documents status (or its range, or a default).
func documents(op *v3.Operation, status int) bool {
	if op.Responses == nil {
		return false
	}
	if op.Responses.Default != nil {
		return true
	}
	if op.Responses.Codes == nil {
		return false
	}
	return op.Responses.Codes.GetOrZero(fmt.Sprint(status)) != nil ||
		op.Responses.Codes.GetOrZero(fmt.Sprintf("%dXX", status/100)) != nil
}

func describe(errs []*vErrors.ValidationError) string {
	var b strings.Builder
	for i, e := range errs {
		if i > 0 {
			b.WriteString("\n  ")
		}
		b.WriteString(e.Message)
		if e.Reason != "" && e.Reason != e.Message {
			b.WriteString(": " + e.Reason)
		}
		for _, f := range e.SchemaValidationErrors {
			b.WriteString("\n    " + f.Error())
		}
	}
	return b.String()
}

func fetch(ctx context.Context, client *http.Client, baseURL string) ([]byte, error) {
	if client == nil {
		client = &http.Client{}
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, strings.TrimSuffix(baseURL, "/")+openapi.Path, nil)
	if err != nil {
		return nil, fmt.Errorf("openapitest: %w", err)
	}
	resp, err := client.Do(req)
	if err != nil {
		return nil, fmt.Errorf("openapitest: fetch the document: %w", err)
	}
	defer resp.Body.Close()
	doc, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, fmt.Errorf("openapitest: fetch the document: %w", err)
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("openapitest: GET %s = %d: %.200s", req.URL, resp.StatusCode, doc)
	}
	return doc, nil
}

// transport is an http.RoundTripper that checks every exchange with a
// registered service against that service's document (Validator.Check)
// and passes requests to other hosts through unchecked. A mismatch is
// returned as the request's error (a *mismatchError, the response
// discarded) and kept for Err. It is safe for concurrent use.
type transport struct {
	next http.RoundTripper

	mu         sync.Mutex
	services   map[string]*Validator // by scheme://host
	built      map[[32]byte]*Validator
	mismatches []error
}

// NewTransport returns a transport sending requests through next (nil:
// the http.DefaultTransport of the moment, so that installing the
// transport as http.DefaultTransport afterwards does not loop).
func NewTransport(next http.RoundTripper) *transport {
	if next == nil {
		next = http.DefaultTransport
	}
	return &transport{next: next, services: map[string]*Validator{}, built: map[[32]byte]*Validator{}}
}

// Add checks the exchanges with the service at baseURL (its scheme and
// host; the path is ignored) against v.
func (t *transport) Add(baseURL string, v *Validator) error {
	key, err := hostKey(baseURL)
	if err != nil {
		return err
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	t.services[key] = v
	return nil
}

// Remove stops checking the exchanges with baseURL's host: the service
// there stopped, and the port may go to a server with another contract
// (a test's stand-in gateway) that must not be checked against it.
func (t *transport) Remove(baseURL string) {
	key, err := hostKey(baseURL)
	if err != nil {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	delete(t.services, key)
}

// AddService fetches the document the service at baseURL serves at
// /openapi.json (unchecked) and checks the exchanges with it from then on.
// Services serving the same document share one validator.
func (t *transport) AddService(ctx context.Context, baseURL string) error {
	doc, err := fetch(ctx, &http.Client{Transport: t.next}, baseURL)
	if err != nil {
		return err
	}
	sum := sha256.Sum256(doc)
	t.mu.Lock()
	v := t.built[sum]
	t.mu.Unlock()
	if v == nil {
		if v, err = New(doc); err != nil {
			return fmt.Errorf("%s: %w", baseURL, err)
		}
		t.mu.Lock()
		t.built[sum] = v
		t.mu.Unlock()
	}
	return t.Add(baseURL, v)
}

// Err returns every mismatch seen so far, joined, or nil.
func (t *transport) Err() error {
	t.mu.Lock()
	defer t.mu.Unlock()
	return errors.Join(t.mismatches...)
}

// RoundTrip sends req and checks the exchange when req goes to a
// registered service. Both bodies are read whole.
func (t *transport) RoundTrip(req *http.Request) (*http.Response, error) {
	key, _ := hostKey(req.URL.String())
	t.mu.Lock()
	v := t.services[key]
	t.mu.Unlock()
	if v == nil {
		return t.next.RoundTrip(req)
	}
	var reqBody []byte
	out := req.Clone(req.Context())
	if req.Body != nil && req.Body != http.NoBody {
		var err error
		reqBody, err = io.ReadAll(req.Body)
		req.Body.Close()
		if err != nil {
			return nil, fmt.Errorf("openapitest: read the request body: %w", err)
		}
		out.Body = io.NopCloser(bytes.NewReader(reqBody))
		out.GetBody = func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(reqBody)), nil }
	}
	resp, err := t.next.RoundTrip(out)
	if err != nil {
		return nil, err
	}
	respBody, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil {
		return nil, fmt.Errorf("openapitest: %s %s: read the response body: %w", req.Method, req.URL, err)
	}
	resp.Body = io.NopCloser(bytes.NewReader(respBody))
	resp.Request = req
	if err := v.Check(req, reqBody, resp, respBody); err != nil {
		t.mu.Lock()
		t.mismatches = append(t.mismatches, err)
		t.mu.Unlock()
		return nil, err
	}
	return resp, nil
}

func hostKey(raw string) (string, error) {
	u, err := url.Parse(raw)
	if err != nil || u.Host == "" {
		return "", fmt.Errorf("openapitest: %q is not a base URL", raw)
	}
	return u.Scheme + "://" + u.Host, nil
}

// probe sends every operation of ops to the service at baseURL without a
// token or body (path parameters filled with a UUID) and reports those
// answered 404 or 405: documented, yet not served. A served route answers
// something else (401 where a token is required).
func probe(ctx context.Context, client *http.Client, baseURL string, ops []openapi.Operation) error {
	const filler = "0190a0b0-0000-7000-8000-000000000000"
	var errs []error
	for _, op := range ops {
		p := op.Path
		for {
			i := strings.IndexByte(p, '{')
			j := strings.IndexByte(p, '}')
			if i < 0 || j < i {
				break
			}
			p = p[:i] + filler + p[j+1:]
		}
		req, err := http.NewRequestWithContext(ctx, op.Method, strings.TrimSuffix(baseURL, "/")+p, nil)
		if err != nil {
			return fmt.Errorf("openapitest: %s: %w", op, err)
		}
		resp, err := client.Do(req)
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", op, err))
			continue
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode == http.StatusNotFound || resp.StatusCode == http.StatusMethodNotAllowed {
			errs = append(errs, fmt.Errorf("%s is documented, but %s %s answered %d", op, op.Method, p, resp.StatusCode))
		}
	}
	return errors.Join(errs...)
}

// CompareRoutes reports the differences between the routes a router
// serves and the operations a document has: every route served but not
// documented, and every operation documented but not served.
func CompareRoutes(served, documented []openapi.Operation) error {
	var errs []error
	for _, op := range served {
		if !slices.Contains(documented, op) {
			errs = append(errs, fmt.Errorf("%s is served but not documented", op))
		}
	}
	for _, op := range documented {
		if !slices.Contains(served, op) {
			errs = append(errs, fmt.Errorf("%s is documented but not served", op))
		}
	}
	return errors.Join(errs...)
}

// Run runs a test binary's tests (call it from TestMain) with t as
// http.DefaultTransport, so that every client without a transport of its
// own (http.DefaultClient, http.Get, test helpers, fuzz harnesses) goes
// through it, and returns the exit code for os.Exit: m's, or 1 when an
// exchange did not match although every test passed (a test that
// swallowed the error, a poll that retried past it).
//
//	var api = openapitest.NewTransport(nil)
//
//	func TestMain(m *testing.M) { os.Exit(api.Run(m)) }
func (t *transport) Run(m *testing.M) int {
	http.DefaultTransport = t
	code := m.Run()
	if err := t.Err(); err != nil {
		fmt.Fprintf(os.Stderr, "exchanges the OpenAPI document does not describe:\n%v\n", err)
		if code == 0 {
			code = 1
		}
	}
	return code
}

// CheckRoutes reports whether own, a service's OpenAPI document, merged
// with the host's routes for h, is a valid OpenAPI 3.1 document, and
// whether own documents exactly the routes the service's router serves
// (served; Collect gathers them from chi.Walk).
func CheckRoutes(own []byte, h openapi.Host, served []openapi.Operation) error {
	doc, err := openapi.Document(own, h)
	if err != nil {
		return err
	}
	if _, err := New(doc); err != nil {
		return err
	}
	documented, err := openapi.Operations(own)
	if err != nil {
		return err
	}
	return CompareRoutes(served, documented)
}

// Collect returns a chi.WalkFunc that appends every route it walks to
// into (as a plain func type, so this package needs no router).
func Collect(into *[]openapi.Operation) func(method, route string, _ http.Handler, _ ...func(http.Handler) http.Handler) error {
	return func(method, route string, _ http.Handler, _ ...func(http.Handler) http.Handler) error {
		*into = append(*into, openapi.Operation{Method: method, Path: route})
		return nil
	}
}

// CheckServed reports whether the service at baseURL serves, at
// /openapi.json, exactly its own document own merged with the host's
// routes for h (openapi.Document), and whether it serves every operation
// of it (Probe).
func CheckServed(ctx context.Context, client *http.Client, baseURL string, own []byte, h openapi.Host) error {
	if client == nil {
		client = &http.Client{}
	}
	served, err := fetch(ctx, client, baseURL)
	if err != nil {
		return err
	}
	want, err := openapi.Document(own, h)
	if err != nil {
		return err
	}
	if !bytes.Equal(served, want) {
		return fmt.Errorf("openapitest: %s%s is not the service's document merged with the host's routes:\n%s",
			baseURL, openapi.Path, firstDifference(served, want))
	}
	ops, err := openapi.Operations(served)
	if err != nil {
		return err
	}
	return probe(ctx, client, baseURL, ops)
}

// firstDifference shows where a and b part, a few lines of each.
func firstDifference(a, b []byte) string {
	al, bl := strings.Split(string(a), "\n"), strings.Split(string(b), "\n")
	for i := 0; i < len(al) || i < len(bl); i++ {
		if i >= len(al) || i >= len(bl) || al[i] != bl[i] {
			lines := func(l []string) string { return strings.Join(l[min(i, len(l)):min(i+3, len(l))], "\n") }
			return fmt.Sprintf("line %d, served:\n%s\nwant:\n%s", i+1, lines(al), lines(bl))
		}
	}
	return "(equal)"
}
