// Package ops tells an operator how one service stands, for the operator's
// tenant: its queues (depth, consumers, the tenant's dead letters and the
// oldest one's age), its outbox backlog, and a request's journey through
// it by correlation id (what it emitted, what each of its consumers
// committed, what it dead-lettered). Every service's host serves it under
// PathPrefix; the operator console (package console) asks each service
// and puts the answers side by side, so each service stays the authority
// over its own data and its own tenant checks.
package ops

import (
	"context"
	"fmt"
	"net/http"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/agora-platform/agora/pkg/fabric/auth"
	"github.com/agora-platform/agora/pkg/fabric/httpjson"
	"github.com/agora-platform/agora/pkg/fabric/internal/dlq"
	"github.com/agora-platform/agora/pkg/fabric/internal/edge"
	"github.com/agora-platform/agora/pkg/fabric/problem"
	fabtenant "github.com/agora-platform/agora/pkg/fabric/tenant"
)

// PathPrefix is where the host serves the handler.
const PathPrefix = "/v1/ops/"

// Status is a service's state as one tenant's operator sees it.
type Status struct {
	Service string        `json:"service"`
	Queues  []QueueStatus `json:"queues"`
	// Outbox is nil for a service that runs no relay.
	Outbox *OutboxStatus `json:"outbox,omitempty"`
}

// QueueStatus is one consumer queue. Depth and Consumers are the broker's
// figures for the queue, shared by every tenant (a queue is not
// partitioned by tenant, and the counts name no one); the dead letters are
// the tenant's own.
type QueueStatus struct {
	Queue       string `json:"queue"`
	Depth       int    `json:"depth"`
	Consumers   int    `json:"consumers"`
	DeadLetters int    `json:"deadLetters"`
	// OldestDeadLetterSeconds is the age of the tenant's oldest letter
	// (since it was dead-lettered); absent when there is none.
	OldestDeadLetterSeconds *float64 `json:"oldestDeadLetterSeconds,omitempty"`
	// Error says why the figures above could not be read.
	Error string `json:"error,omitempty"`
}

// OutboxStatus is the tenant's backlog: events committed, not yet
// confirmed by the broker.
type OutboxStatus struct {
	Pending              int      `json:"pending"`
	OldestPendingSeconds *float64 `json:"oldestPendingSeconds,omitempty"`
}

// Journey is what one service knows of a correlation id, for one tenant.
type Journey struct {
	Service       string       `json:"service"`
	CorrelationID string       `json:"correlationId"`
	Emitted       []Emitted    `json:"emitted"`
	Consumed      []Consumed   `json:"consumed"`
	DeadLetters   []dlq.Letter `json:"deadLetters"`
}

// Emitted is an event the service put in its outbox.
type Emitted struct {
	ID          string     `json:"id"`
	Type        string     `json:"type"`
	CausationID string     `json:"causationId,omitempty"`
	OccurredAt  time.Time  `json:"occurredAt"`
	PublishedAt *time.Time `json:"publishedAt,omitempty"` // nil: still in the outbox
}

// Consumed is an event one of the service's consumers committed (its inbox
// row): the consumer's effect is in the service's database.
type Consumed struct {
	Consumer   string    `json:"consumer"`
	EventID    string    `json:"eventId"`
	EventType  string    `json:"eventType"`
	ReceivedAt time.Time `json:"receivedAt"`
}

// Letters lists a queue's dead letters (dlq.Ops does).
type Letters interface {
	List(ctx context.Context, queue string, limit int) ([]dlq.Letter, error)
}

// Channels opens broker channels (broker.Conn does).
type Channels interface {
	Channel(ctx context.Context) (*amqp.Channel, error)
}

// Service is what the handler reads for one service.
type Service struct {
	Name    string
	Schema  string // the service's database schema (its fabric tables)
	Queues  []string
	Relay   bool // it runs an outbox relay
	Pool    *pgxpool.Pool
	Broker  Channels
	Letters Letters
	Now     func() time.Time
}

// maxLetters bounds the walk of one DLQ for a status: the count reads
// "at least" beyond it, and the oldest age is that of the letters walked.
const maxLetters = 5000

// Status reads the service's state for tenant.
func (s Service) Status(ctx context.Context, tenant string) (Status, error) {
	st := Status{Service: s.Name, Queues: []QueueStatus{}}
	for _, q := range s.Queues {
		st.Queues = append(st.Queues, s.queueStatus(ctx, q, tenant))
	}
	if s.Relay {
		var pending int
		var oldest *time.Time
		err := fabtenant.Tx(ctx, s.Pool, tenant, func(tx pgx.Tx) error {
			return tx.QueryRow(ctx, `SELECT count(*), min(created_at) FROM `+s.table("outbox_event")+`
				WHERE published_at IS NULL AND tenant_id = $1`, tenant).Scan(&pending, &oldest)
		})
		if err != nil {
			return st, fmt.Errorf("ops: outbox backlog: %w", err)
		}
		st.Outbox = &OutboxStatus{Pending: pending, OldestPendingSeconds: s.age(oldest)}
	}
	return st, nil
}

func (s Service) queueStatus(ctx context.Context, queue, tenant string) QueueStatus {
	qs := QueueStatus{Queue: queue}
	ch, err := s.Broker.Channel(ctx)
	if err != nil {
		qs.Error = err.Error()
		return qs
	}
	defer ch.Close()
	q, err := ch.QueueDeclarePassive(queue, true, false, false, false, nil)
	if err != nil {
		qs.Error = fmt.Sprintf("queue %s: %v", queue, err)
		return qs
	}
	qs.Depth, qs.Consumers = q.Messages, q.Consumers
	letters, err := s.Letters.List(ctx, queue, maxLetters)
	if err != nil {
		qs.Error = fmt.Sprintf("dead letters of %s: %v", queue, err)
		return qs
	}
	var oldest *time.Time
	for _, l := range letters {
		if !l.BelongsTo(tenant) {
			continue
		}
		qs.DeadLetters++
		if at, err := time.Parse(time.RFC3339Nano, l.LastAttempt); err == nil && (oldest == nil || at.Before(*oldest)) {
			oldest = &at
		}
	}
	qs.OldestDeadLetterSeconds = s.age(oldest)
	return qs
}

// Journey reads what the service knows of correlationID for tenant.
func (s Service) Journey(ctx context.Context, tenant, correlationID string) (Journey, error) {
	j := Journey{Service: s.Name, CorrelationID: correlationID, Emitted: []Emitted{}, Consumed: []Consumed{}, DeadLetters: []dlq.Letter{}}
	err := fabtenant.Tx(ctx, s.Pool, tenant, func(tx pgx.Tx) error {
		if s.Relay {
			rows, err := tx.Query(ctx, `SELECT id::text, event_type, coalesce(causation_id, ''), occurred_at, published_at
				FROM `+s.table("outbox_event")+` WHERE correlation_id = $1 AND tenant_id = $2 ORDER BY seq`, correlationID, tenant)
			if err != nil {
				return fmt.Errorf("outbox: %w", err)
			}
			if j.Emitted, err = pgx.CollectRows(rows, pgx.RowToStructByPos[Emitted]); err != nil {
				return fmt.Errorf("outbox: %w", err)
			}
		}
		if len(s.Queues) > 0 {
			rows, err := tx.Query(ctx, `SELECT consumer, event_id::text, event_type, received_at
				FROM `+s.table("inbox_message")+` WHERE correlation_id = $1 AND tenant_id = $2 AND consumer = ANY($3)
				ORDER BY received_at`, correlationID, tenant, s.Queues)
			if err != nil {
				return fmt.Errorf("inbox: %w", err)
			}
			if j.Consumed, err = pgx.CollectRows(rows, pgx.RowToStructByPos[Consumed]); err != nil {
				return fmt.Errorf("inbox: %w", err)
			}
		}
		return nil
	})
	if err != nil {
		return j, fmt.Errorf("ops: journey: %w", err)
	}
	for _, q := range s.Queues {
		letters, err := s.Letters.List(ctx, q, maxLetters)
		if err != nil {
			return j, fmt.Errorf("ops: journey: dead letters of %s: %w", q, err)
		}
		for _, l := range letters {
			if l.BelongsTo(tenant) && l.CorrelationID == correlationID {
				j.DeadLetters = append(j.DeadLetters, l)
			}
		}
	}
	return j, nil
}

func (s Service) table(name string) string { return pgx.Identifier{s.Schema, name}.Sanitize() }

func (s Service) age(t *time.Time) *float64 {
	if t == nil {
		return nil
	}
	now := time.Now
	if s.Now != nil {
		now = s.Now
	}
	secs := max(now().Sub(*t).Seconds(), 0)
	return &secs
}

// Handler serves, for the token's tenant (mount it behind
// verifier.Require(auth.RoleOperator)):
//
//	GET /v1/ops/status                      the service's Status
//	GET /v1/ops/journeys/{correlationId}    its Journey
func Handler(s Service) http.Handler {
	mux := http.NewServeMux()
	tenant := func(w http.ResponseWriter, r *http.Request) (string, bool) {
		c, ok := auth.FromContext(r.Context())
		if !ok {
			w.Header().Set("WWW-Authenticate", `Bearer realm="agora"`)
			problem.Error(w, r, http.StatusUnauthorized, "a bearer token is required")
			return "", false
		}
		if !c.Has(auth.RoleOperator) || c.TenantID == "" {
			problem.Error(w, r, http.StatusForbidden, "operations views require the operator role of a tenant")
			return "", false
		}
		return c.TenantID, true
	}
	mux.HandleFunc("GET "+PathPrefix+"status", func(w http.ResponseWriter, r *http.Request) {
		t, ok := tenant(w, r)
		if !ok {
			return
		}
		st, err := s.Status(r.Context(), t)
		if err != nil {
			problem.Fail(w, r, nil, err)
			return
		}
		httpjson.Write(w, http.StatusOK, st)
	})
	mux.HandleFunc("GET "+PathPrefix+"journeys/{correlationId}", func(w http.ResponseWriter, r *http.Request) {
		t, ok := tenant(w, r)
		if !ok {
			return
		}
		id := r.PathValue("correlationId")
		if id == "" || len(id) > 200 {
			problem.Error(w, r, http.StatusBadRequest, "a correlation id of at most 200 characters is required")
			return
		}
		j, err := s.Journey(r.Context(), t, id)
		if err != nil {
			problem.Fail(w, r, nil, err)
			return
		}
		httpjson.Write(w, http.StatusOK, j)
	})
	return edge.Routes(mux)
}

// Serves reports whether the handler has anything to show for s.
func (s Service) Serves() bool { return len(s.Queues) > 0 || s.Relay }
