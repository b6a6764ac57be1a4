package main

import (
	"encoding/json"
	"io"
	"net/http"
	"testing"
	"time"

	"github.com/agora-platform/agora/deploy/deploytest"
	"github.com/agora-platform/agora/pkg/fabric/envelope"
	"github.com/agora-platform/agora/pkg/fabric/fabrictest"
)

// platform is one test's corner of the real infrastructure: the shared
// test stack (deploytest.Stack) of the workflow service.
type platform struct {
	*deploytest.Stack
}

func newPlatform(t testing.TB) *platform {
	t.Helper()
	return &platform{deploytest.NewStack(t, "workflow")}
}

// start runs the service on p (several calls share its schema and vhost,
// like several instances) and returns its base URL. It stops the service
// at cleanup and fails the test if run does not return nil.
func (p *platform) start(t testing.TB, extra map[string]string) string {
	t.Helper()
	url := p.Start(t, run, extra).URL
	return url
}

// submitted publishes request.submitted.v1 as the request service would.
func (p *platform) submitted(t *testing.T, tenant, citizen, serviceID string) envelope.Envelope {
	t.Helper()
	env, err := envelope.New("request.submitted.v1", tenant, "request-service", map[string]any{
		"requestId": deploytest.NewID(t), "protocol": "AGR-2026-000001", "serviceId": serviceID, "formId": "f",
		"formVersion": 1, "channel": "web", "citizenId": citizen, "submittedAt": time.Now().UTC().Format(time.RFC3339Nano),
	})
	if err != nil {
		t.Fatal(err)
	}
	p.Publish(t, env)
	return env
}

func requestIDOf(t *testing.T, env envelope.Envelope) string {
	t.Helper()
	var p struct {
		RequestID string `json:"requestId"`
	}
	if err := json.Unmarshal(env.Payload, &p); err != nil {
		t.Fatal(err)
	}
	return p.RequestID
}

func do(t *testing.T, method, url, token string, body io.Reader, header map[string]string) deploytest.Response {
	t.Helper()
	return deploytest.Do(t, method, url, token, body, header)
}

// expectProblem is deploytest.ExpectProblem, under the name this
// package's tests have always used.
var expectProblem = deploytest.ExpectProblem

// waitDecision waits until the service at url has recorded one decision on
// e (read with token) and returns it.
func waitDecision(t *testing.T, url, token string, e envelope.Envelope) decisionView {
	t.Helper()
	var got []decisionView
	fabrictest.Eventually(t, 20*time.Second, "the decision on "+e.ID, func() bool {
		do(t, http.MethodGet, url+"/v1/decisions?eventId="+e.ID, token, nil, nil).JSON(t, &got)
		return len(got) == 1
	})
	return got[0]
}
