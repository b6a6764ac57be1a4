// Package export is the report export: what a tenant asks for, the
// report.export.v1 job that carries it out, the files it writes (CSV or
// Parquet) and the worker's run, which streams the projection rows of the
// range into object storage and records its progress. It knows nothing of
// Postgres, S3 or AMQP: those are behind the interfaces of run.go.
package export

import (
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"

	"github.com/agora-platform/agora/pkg/fabric"
	"github.com/agora-platform/agora/pkg/fabric/envelope"
	"github.com/agora-platform/agora/services/analytics/internal/projection"
)

// Errors of the export domain.
var (
	// ErrInvalid: a request or job breaks a rule (bad dates, an unknown
	// format, a malformed id…). It wraps projection.ErrInvalid for the
	// date rules, which the query API shares.
	ErrInvalid = projection.ErrInvalid
	// ErrNotFound: no such export for the tenant; of the fabric's kind.
	ErrNotFound = fmt.Errorf("export %w", fabric.ErrNotFound)
	// ErrFinished: the export is done or failed already; a job for it is a
	// redelivery with nothing left to do.
	ErrFinished = errors.New("export already finished")
	// ErrSuperseded: another worker took the export over (a redelivery
	// while this one still ran); this one must stop writing.
	ErrSuperseded = errors.New("export taken over by another attempt")
)

// Status is where an export is.
type Status string

// Statuses of an export.
const (
	StatusQueued  Status = "queued"  // the job waits for a worker (or for a retry)
	StatusRunning Status = "running" // a worker is writing the file
	StatusDone    Status = "done"    // the file is in object storage
	StatusFailed  Status = "failed"  // given up; Error says why
)

// Format is the file format of an export.
type Format string

// Formats of an export file.
const (
	CSV     Format = "csv"
	Parquet Format = "parquet"
)

// ParseFormat reads a format; empty means CSV.
func ParseFormat(s string) (Format, error) {
	switch Format(s) {
	case "", CSV:
		return CSV, nil
	case Parquet:
		return Parquet, nil
	}
	return "", fmt.Errorf("%w: format %q is not csv or parquet", ErrInvalid, s)
}

// ContentType is the media type of a file in format f.
func (f Format) ContentType() string {
	if f == Parquet {
		return "application/vnd.apache.parquet"
	}
	return "text/csv; charset=utf-8"
}

// Export is one export of a tenant's projection rows.
type Export struct {
	ID          string
	TenantID    string
	RequestedBy string // the token's subject
	Range       projection.Range
	Format      Format
	Status      Status
	// Attempt numbers the workers that took the export (0 while queued
	// for the first time); a worker's writes are fenced by its attempt.
	Attempt     int
	RowsTotal   *int64 // known once a worker has counted them
	RowsWritten int64
	ObjectKey   string // set when done
	Error       string // why the last attempt failed
	CreatedAt   time.Time
	UpdatedAt   time.Time
	StartedAt   *time.Time
	FinishedAt  *time.Time
}

// New validates a tenant's request for an export (dates YYYY-MM-DD,
// inclusive, from <= to, at most projection.MaxRangeDays; format csv, the
// default, or parquet) and returns the export, queued under a new id.
func New(tenantID, requestedBy, from, to, format string) (Export, error) {
	rng, err := projection.ParseRange(from, to)
	if err != nil {
		return Export{}, err
	}
	f, err := ParseFormat(format)
	if err != nil {
		return Export{}, err
	}
	id, err := uuid.NewV7()
	if err != nil {
		return Export{}, fmt.Errorf("export id: %w", err)
	}
	return Export{ID: id.String(), TenantID: tenantID, RequestedBy: requestedBy, Range: rng, Format: f, Status: StatusQueued}, nil
}

// ObjectKey is where the file of export id of tenantID goes: under the
// tenant's prefix, so a bucket policy or a listing can be held to one
// tenant.
func ObjectKey(tenantID, id string, f Format) string {
	return "tenant=" + tenantID + "/exports/" + id + "." + string(f)
}

// FileName is the name a download of e is saved under.
func (e Export) FileName() string {
	return fmt.Sprintf("report-%s-%s.%s", e.Range.From.Format(projection.DateLayout), e.Range.To.Format(projection.DateLayout), e.Format)
}

// JobType is the catalog type of the export job (platform.work).
const JobType = "report.export.v1"

// Producer names the analytics service in the envelopes it writes.
const Producer = "analytics"

// Job is the report.export.v1 payload. The export's row is the source of
// truth: the worker reads range and format from it, and the job carries
// them for the catalog's consumers and for whoever inspects a dead letter.
type Job struct {
	ReportID string `json:"reportId"`
	From     string `json:"from"`
	To       string `json:"to"`
	Format   Format `json:"format,omitempty"`
}

// NewJob returns the job envelope that carries out e.
func NewJob(e Export) (envelope.Envelope, error) {
	return envelope.New(JobType, e.TenantID, Producer, Job{ReportID: e.ID,
		From: e.Range.From.Format(projection.DateLayout), To: e.Range.To.Format(projection.DateLayout), Format: e.Format})
}

// ParseJob reads and checks a job payload. On an error (wrapping
// ErrInvalid) the returned job still carries the report id when that part
// was readable, so the export can be marked failed.
func ParseJob(raw []byte) (Job, error) {
	var j Job
	if err := json.Unmarshal(raw, &j); err != nil {
		return Job{}, fmt.Errorf("%w: job payload: %v", ErrInvalid, err)
	}
	u, err := uuid.Parse(j.ReportID)
	if err != nil {
		return Job{}, fmt.Errorf("%w: reportId %q is not a UUID", ErrInvalid, j.ReportID)
	}
	// The canonical spelling: PostgreSQL refuses some that uuid.Parse takes.
	j.ReportID = u.String()
	if _, err := projection.ParseRange(j.From, j.To); err != nil {
		return Job{ReportID: j.ReportID}, err
	}
	if j.Format, err = ParseFormat(string(j.Format)); err != nil {
		return Job{ReportID: j.ReportID}, err
	}
	return j, nil
}
