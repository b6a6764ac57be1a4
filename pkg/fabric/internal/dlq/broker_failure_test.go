package dlq

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"testing"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/agora-platform/agora/pkg/fabric/broker"
)

// A broker that is down or dropped the connection is a 503 with
// Retry-After, like a database outage; a broker that refused is a 502.
func TestBrokerFailureStatus(t *testing.T) {
	tests := []struct {
		name string
		err  error
		want int
	}{
		{"connection closed", fmt.Errorf("get: %w", amqp.ErrClosed), http.StatusServiceUnavailable},
		{"channel closed before confirm", fmt.Errorf("replay: %w", broker.ErrConnectionLost), http.StatusServiceUnavailable},
		{"confirm timed out", broker.ErrConfirmTimeout, http.StatusServiceUnavailable},
		{"broker shutting down", fmt.Errorf("%w: %w", broker.ErrConnectionLost, &amqp.Error{Code: amqp.ConnectionForced, Reason: "CONNECTION_FORCED - broker forced connection closure"}), http.StatusServiceUnavailable},
		{"recoverable channel error", &amqp.Error{Code: amqp.ResourceError, Recover: true}, http.StatusServiceUnavailable},
		{"deadline waiting for the broker", fmt.Errorf("channel: %w", context.DeadlineExceeded), http.StatusServiceUnavailable},
		{"access refused", fmt.Errorf("%w: %w", broker.ErrConnectionLost, &amqp.Error{Code: amqp.AccessRefused, Reason: "ACCESS_REFUSED"}), http.StatusBadGateway},
		{"queue missing", &amqp.Error{Code: amqp.NotFound, Reason: "NOT_FOUND - no queue"}, http.StatusBadGateway},
		{"something else", errors.New("unexpected"), http.StatusBadGateway},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rec := httptest.NewRecorder()
			brokerFailure(rec, httptest.NewRequest(http.MethodGet, PathPrefix+"q", nil), tt.err)
			if rec.Code != tt.want {
				t.Fatalf("status = %d, want %d", rec.Code, tt.want)
			}
			if got := rec.Header().Get("Retry-After"); (tt.want == http.StatusServiceUnavailable) != (got != "") {
				t.Errorf("Retry-After = %q with status %d", got, rec.Code)
			}
			if ct := rec.Header().Get("Content-Type"); ct != "application/problem+json" {
				t.Errorf("Content-Type = %q, want a problem", ct)
			}
		})
	}
}
