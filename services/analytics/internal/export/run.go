package export

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"time"

	"github.com/agora-platform/agora/pkg/fabric/text"
	"github.com/agora-platform/agora/services/analytics/internal/projection"
)

// Store keeps the exports and reads the projection for them. Each method
// is its own short transaction, except View.
type Store interface {
	// Claim starts attempt Attempt of a queued export, or restarts one
	// whose worker died (running), from nothing. ErrNotFound: no such
	// export of the tenant; ErrFinished: it is done or failed.
	Claim(ctx context.Context, tenantID, id string) (Export, error)
	// Progress records the rows counted and written so far by attempt;
	// ErrSuperseded when another attempt has taken the export over.
	Progress(ctx context.Context, tenantID, id string, attempt int, total, written int64) error
	// Finish marks attempt done with its object; ErrSuperseded as Progress.
	Finish(ctx context.Context, tenantID, id string, attempt int, objectKey string, rows int64) error
	// Release ends a failed attempt: back to queued for a retry, or failed
	// for good when giveUp. Nothing happens if another attempt took over.
	Release(ctx context.Context, tenantID, id string, attempt int, giveUp bool, reason string) error
	// Fail marks a not yet finished export failed (a job that cannot run).
	Fail(ctx context.Context, tenantID, id, reason string) error
	// View calls fn with a consistent snapshot of the tenant's projection
	// in r: the rows counted are the rows read, however long the export.
	View(ctx context.Context, tenantID string, r projection.Range, fn func(Snapshot) error) error
}

// Snapshot is one consistent read of the projection rows of an export.
type Snapshot interface {
	// Count returns how many rows the export has.
	Count(ctx context.Context) (int64, error)
	// Next returns the next at most n rows in (day, service, channel,
	// status) order, none at the end.
	Next(ctx context.Context, n int) ([]projection.Row, error)
}

// Objects stores export files.
type Objects interface {
	// Put streams body (size -1: unknown) to bucket/key, replacing any
	// object there, and returns once the store has the whole object (or
	// the error). objstore.New's store is one.
	Put(ctx context.Context, bucket, key string, body io.Reader, size int64, contentType string) error
}

// Runner carries out export jobs.
type Runner struct {
	store       Store
	objects     Objects
	bucket      string
	pageRows    int
	maxAttempts int
	log         *slog.Logger
}

// NewRunner returns a Runner reading pageRows rows at a time (and
// recording progress after each page). maxAttempts is how many times the
// consumer delivers a job that keeps failing transiently (its retry tiers
// plus one): the attempt that reaches it marks the export failed, since the
// job then goes to the dead-letter queue, from which report.export.v1 is
// not replayable.
func NewRunner(store Store, objects Objects, bucket string, pageRows, maxAttempts int, log *slog.Logger) *Runner {
	return &Runner{store: store, objects: objects, bucket: bucket, pageRows: max(pageRows, 1), maxAttempts: max(maxAttempts, 1), log: log}
}

// Run carries out the job in payload for tenantID. It returns nil when the
// export is done, or was already finished (a redelivery), or was taken
// over by another attempt; an error wrapping ErrInvalid for a malformed
// job (the export, if its id was readable, is marked failed); ErrNotFound
// for a job whose export does not exist; any other error is a dependency
// failing (database, object storage) and worth a retry.
func (r *Runner) Run(ctx context.Context, tenantID string, payload []byte) error {
	job, err := ParseJob(payload)
	if err != nil {
		if job.ReportID != "" {
			dctx, cancel := detached(ctx)
			defer cancel()
			if ferr := r.store.Fail(dctx, tenantID, job.ReportID, text.Truncate(err.Error(), 1000)); ferr != nil {
				r.log.WarnContext(ctx, "could not mark a malformed export job failed", "export", job.ReportID, "err", ferr)
			}
		}
		return err
	}
	e, err := r.store.Claim(ctx, tenantID, job.ReportID)
	if errors.Is(err, ErrFinished) {
		return nil
	}
	if err != nil {
		return err
	}
	rows, err := r.write(ctx, e)
	if err == nil {
		err = r.store.Finish(ctx, e.TenantID, e.ID, e.Attempt, ObjectKey(e.TenantID, e.ID, e.Format), rows)
	}
	if errors.Is(err, ErrSuperseded) {
		r.log.InfoContext(ctx, "export taken over by a later attempt", "export", e.ID, "attempt", e.Attempt)
		return nil
	}
	if err != nil {
		giveUp := e.Attempt >= r.maxAttempts
		dctx, cancel := detached(ctx)
		defer cancel()
		if rerr := r.store.Release(dctx, e.TenantID, e.ID, e.Attempt, giveUp, text.Truncate(err.Error(), 1000)); rerr != nil {
			// The export stays running; the retry restarts it.
			r.log.WarnContext(ctx, "could not record a failed export attempt", "export", e.ID, "attempt", e.Attempt, "err", rerr)
		}
		return fmt.Errorf("export %s attempt %d: %w", e.ID, e.Attempt, err)
	}
	r.log.InfoContext(ctx, "export done", "export", e.ID, "attempt", e.Attempt, "rows", rows, "format", e.Format)
	return nil
}

// detached is ctx without its cancellation, bounded: recording an
// attempt's end must happen even when the attempt ended because the
// service is shutting down.
func detached(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
}

// write streams the rows of e into its object and returns how many it
// wrote. The file is encoded while it uploads (a pipe), so memory holds a
// page and an upload part, never the whole file.
func (r *Runner) write(ctx context.Context, e Export) (int64, error) {
	var written int64
	err := r.store.View(ctx, e.TenantID, e.Range, func(snap Snapshot) error {
		total, err := snap.Count(ctx)
		if err != nil {
			return err
		}
		if err := r.store.Progress(ctx, e.TenantID, e.ID, e.Attempt, total, 0); err != nil {
			return err
		}
		ctx, cancel := context.WithCancel(ctx)
		defer cancel()
		pr, pw := io.Pipe()
		uploaded := make(chan error, 1)
		go func() {
			err := r.objects.Put(ctx, r.bucket, ObjectKey(e.TenantID, e.ID, e.Format), pr, -1, e.Format.ContentType())
			// An upload that stopped reading must not leave the encoder
			// blocked on the pipe.
			pr.CloseWithError(errors.Join(err, errUploadEnded))
			uploaded <- err
		}()
		written, err = r.encode(ctx, e, snap, total, pw)
		if err != nil {
			pw.CloseWithError(err)
			cancel()
			// The upload fails too; its error says more when it came first
			// (object storage down), the encoder's when it did.
			return errors.Join(err, <-uploaded)
		}
		pw.Close()
		if err := <-uploaded; err != nil {
			return err
		}
		if written != total {
			// The snapshot cannot change under us; a mismatch is a bug.
			return fmt.Errorf("wrote %d rows of %d counted", written, total)
		}
		return nil
	})
	return written, err
}

// errUploadEnded is what the encoder's writes see once the upload stopped.
var errUploadEnded = errors.New("upload ended")

func (r *Runner) encode(ctx context.Context, e Export, snap Snapshot, total int64, w io.Writer) (int64, error) {
	fw, err := newFileWriter(e.Format, w)
	if err != nil {
		return 0, err
	}
	var written int64
	for {
		if err := ctx.Err(); err != nil {
			return written, err
		}
		rows, err := snap.Next(ctx, r.pageRows)
		if err != nil {
			return written, err
		}
		if len(rows) == 0 {
			break
		}
		if err := fw.Write(rows); err != nil {
			return written, err
		}
		written += int64(len(rows))
		if err := r.store.Progress(ctx, e.TenantID, e.ID, e.Attempt, total, written); err != nil {
			return written, err
		}
	}
	return written, fw.Close()
}
