// Package retryable tells a dependency failure a retry may fix (a database
// or broker briefly away) from one it cannot (a refusal, a bug): the HTTP
// edge answers the first with 503 and Retry-After (problem.Fail), the
// fabric's own APIs likewise.
package retryable

import (
	"context"
	"errors"
	"io"
	"net"
	"strings"

	"github.com/jackc/pgx/v5/pgconn"
	amqp "github.com/rabbitmq/amqp091-go"
)

// transientCodes are PostgreSQL conditions that pass: the connection was
// lost or refused, the server is shutting down or starting, or the
// transaction lost a race it can win on retry.
var transientCodes = map[string]bool{
	"57P01": true, // admin_shutdown: the backend was terminated
	"57P02": true, // crash_shutdown
	"57P03": true, // cannot_connect_now: starting up or recovering
	"53300": true, // too_many_connections
	"40001": true, // serialization_failure
	"40P01": true, // deadlock_detected
}

// Is reports whether err is a dependency failure a retry may fix:
// a PostgreSQL connection that could not be made, was lost or timed out,
// one of transientCodes (or any code of class 08, connection exception);
// a broker connection that is closed, or a broker error it may recover
// from (a refusal such as ACCESS_REFUSED is not); an error that says so
// itself (Transient() bool, as the publisher's lost-confirm errors do); or
// a deadline that ran out waiting for a dependency.
func Is(err error) bool {
	if err == nil {
		return false
	}
	if errors.Is(err, amqp.ErrClosed) { // no connection at all (itself an *amqp.Error)
		return true
	}
	var amqpErr *amqp.Error
	if errors.As(err, &amqpErr) {
		// What the broker said decides, even under a lost confirm: a 403
		// closes the channel too. 320 connection-forced (a broker shutting
		// down) passes, though the library does not mark it recoverable.
		return amqpErr.Recover || amqpErr.Code == amqp.ConnectionForced
	}
	var says interface{ Transient() bool }
	if errors.As(err, &says) {
		return says.Transient()
	}
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		return transientCodes[pgErr.Code] || strings.HasPrefix(pgErr.Code, "08")
	}
	var connErr *pgconn.ConnectError
	if errors.As(err, &connErr) {
		return true
	}
	if pgconn.Timeout(err) || pgconn.SafeToRetry(err) || errors.Is(err, context.DeadlineExceeded) || errors.Is(err, io.ErrUnexpectedEOF) {
		return true
	}
	var netErr net.Error
	return errors.As(err, &netErr)
}
