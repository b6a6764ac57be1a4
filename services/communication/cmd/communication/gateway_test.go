package main

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
)

// gatewayMessage is a message a stand-in gateway accepted: the JSON body
// of the contract (internal/gateway) and the Idempotency-Key it came with.
type gatewayMessage struct {
	Key            string `json:"-"`
	Channel        string `json:"channel"`
	To             string `json:"to"`
	Subject        string `json:"subject"`
	Text           string `json:"text"`
	NotificationID string `json:"notificationId"`
	RequestID      string `json:"requestId"`
}

// Numbers the stand-in treats apart: it refuses messages to refusedPrefix
// for good (422), and answers 503 to unavailablePrefix.
const (
	refusedPrefix     = "+5599"
	unavailablePrefix = "+5598"
)

// gatewayStandIn is an SMS or WhatsApp gateway that honours the
// Idempotency-Key as real gateways do: it records each message it accepts,
// and answers a key it has answered before with that first answer,
// recording nothing new. A call without a key cannot be recognised and is
// a new message every time. A 503 is not remembered: nothing was done, so
// the retry is a first call. Its methods are safe for concurrent use.
type gatewayStandIn struct {
	URL string

	mu       sync.Mutex
	accepted []gatewayMessage
	answers  map[string]int // first answer per key
	calls    map[string]int // calls per key
}

// startGateway serves a stand-in gateway until the test ends.
func startGateway(t testing.TB) *gatewayStandIn {
	t.Helper()
	g := &gatewayStandIn{answers: map[string]int{}, calls: map[string]int{}}
	srv := httptest.NewServer(g)
	g.URL = srv.URL + "/v1/messages"
	t.Cleanup(srv.Close)
	return g
}

func (g *gatewayStandIn) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	var m gatewayMessage
	dec := json.NewDecoder(r.Body)
	dec.DisallowUnknownFields()
	if r.Method != http.MethodPost || r.Header.Get("Content-Type") != "application/json" || dec.Decode(&m) != nil {
		http.Error(w, "not a message of the contract", http.StatusBadRequest)
		return
	}
	m.Key = r.Header.Get("Idempotency-Key")
	w.WriteHeader(g.answer(m))
}

// answer decides what m gets, and records it.
func (g *gatewayStandIn) answer(m gatewayMessage) int {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.calls[m.Key]++
	if status, ok := g.answers[m.Key]; ok && m.Key != "" {
		return status
	}
	status := http.StatusAccepted
	switch {
	case strings.HasPrefix(m.To, unavailablePrefix):
		return http.StatusServiceUnavailable
	case strings.HasPrefix(m.To, refusedPrefix):
		status = http.StatusUnprocessableEntity
	default:
		g.accepted = append(g.accepted, m)
	}
	if m.Key != "" {
		g.answers[m.Key] = status
	}
	return status
}

// messages returns the accepted messages of requestID.
func (g *gatewayStandIn) messages(requestID string) []gatewayMessage {
	g.mu.Lock()
	defer g.mu.Unlock()
	var out []gatewayMessage
	for _, m := range g.accepted {
		if m.RequestID == requestID {
			out = append(out, m)
		}
	}
	return out
}

// callsWith returns how many calls came with key.
func (g *gatewayStandIn) callsWith(key string) int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.calls[key]
}
