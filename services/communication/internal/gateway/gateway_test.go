package gateway_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/agora-platform/agora/services/communication/internal/gateway"
	"github.com/agora-platform/agora/services/communication/internal/notify"
)

var message = notify.Message{NotificationID: "6f1c1d2e-0000-5000-8000-000000000001", RequestID: "r-1",
	Channel: notify.SMS, To: "+5511999990000", Subject: "Request received: protocol AG-1", Body: "line one\r\nline two\r\n"}

// TestSendRequest: the gateway gets the message as JSON, with the
// notification id as idempotency key and the token as bearer.
func TestSendRequest(t *testing.T) {
	var got *http.Request
	var body map[string]string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got = r
		data, _ := io.ReadAll(r.Body)
		if err := json.Unmarshal(data, &body); err != nil {
			t.Errorf("body %s: %v", data, err)
		}
		w.WriteHeader(http.StatusAccepted)
	}))
	defer srv.Close()
	s, err := gateway.New(notify.SMS, gateway.Config{URL: srv.URL + "/v1/messages", Token: "secret"})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Send(context.Background(), message); err != nil {
		t.Fatalf("Send: %v", err)
	}
	for k, want := range map[string]string{"Idempotency-Key": message.NotificationID, "Content-Type": "application/json",
		"Authorization": "Bearer secret"} {
		if v := got.Header.Get(k); v != want {
			t.Errorf("%s = %q, want %q", k, v, want)
		}
	}
	if got.Method != http.MethodPost || got.URL.Path != "/v1/messages" {
		t.Errorf("request %s %s, want POST /v1/messages", got.Method, got.URL.Path)
	}
	want := map[string]string{"channel": "sms", "to": message.To, "subject": message.Subject, "text": "line one\nline two\n",
		"notificationId": message.NotificationID, "requestId": "r-1"}
	for k, v := range want {
		if body[k] != v {
			t.Errorf("body %s = %q, want %q", k, body[k], v)
		}
	}
}

// TestSendClassifiesAnswers: what each answer of the gateway means for the
// message: accepted (nil), refused for good (notify.ErrRejected) or to be
// tried again (any other error).
func TestSendClassifiesAnswers(t *testing.T) {
	const accepted, rejected, retried = "accepted", "rejected", "retried"
	tests := []struct {
		name   string
		status int
		body   string
		want   string
	}{
		{"200 accepted", 200, "", accepted},
		{"201 accepted", 201, `{"id":"m-1"}`, accepted},
		{"202 accepted", 202, "", accepted},
		{"409: the key was accepted before", 409, "", accepted},
		{"400 refused", 400, "", rejected},
		{"401 refused", 401, "", rejected},
		{"422 refused", 422, `{"title":"bad number","detail":"+5511999990000 is not reachable"}`, rejected},
		{"408 retried", 408, "", retried},
		{"429 retried", 429, "", retried},
		{"500 retried", 500, "", retried},
		{"503 retried", 503, "", retried},
		{"a redirect is not followed and retried", 307, "", retried},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if tc.status == 307 {
					w.Header().Set("Location", "/elsewhere")
				}
				w.Header().Set("Content-Type", "application/problem+json")
				w.WriteHeader(tc.status)
				_, _ = w.Write([]byte(tc.body))
			}))
			defer srv.Close()
			s, err := gateway.New(notify.WhatsApp, gateway.Config{URL: srv.URL})
			if err != nil {
				t.Fatal(err)
			}
			err = s.Send(context.Background(), message)
			if got := outcome(err); got != tc.want {
				t.Fatalf("Send after %d = %v (%s), want %s", tc.status, err, got, tc.want)
			}
			if err != nil && strings.Contains(err.Error(), message.To) {
				t.Errorf("error %q names the address", err)
			}
		})
	}
}

// TestSendTimeoutIsRetried: a gateway that does not answer in time may
// have accepted the message; the error asks for the retry its key makes
// safe.
func TestSendTimeoutIsRetried(t *testing.T) {
	release := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { <-release }))
	defer srv.Close()
	defer close(release)
	s, err := gateway.New(notify.SMS, gateway.Config{URL: srv.URL, Timeout: 50 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Send(context.Background(), message); outcome(err) != "retried" {
		t.Fatalf("Send to a silent gateway = %v, want an error to retry", err)
	}
}

func TestNewRefusesABadURL(t *testing.T) {
	for _, u := range []string{"", "gateway.example.org/sms", "ftp://gateway.example.org", "http://"} {
		if _, err := gateway.New(notify.SMS, gateway.Config{URL: u}); err == nil {
			t.Errorf("New(%q) = nil error, want one", u)
		}
	}
}

func outcome(err error) string {
	switch {
	case err == nil:
		return "accepted"
	case errors.Is(err, notify.ErrRejected):
		return "rejected"
	default:
		return "retried"
	}
}
