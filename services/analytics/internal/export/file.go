package export

import (
	"bufio"
	"encoding/csv"
	"fmt"
	"io"
	"strconv"
	"time"

	"github.com/parquet-go/parquet-go"

	"github.com/agora-platform/agora/services/analytics/internal/projection"
)

// FileRow is one row of an export file: a cell of the projection. The
// Parquet column names are the CSV header's.
type FileRow struct {
	// Day is the DATE logical type: days since 1970-01-01. An int32, not a
	// time.Time: parquet-go v0.32 writes a time.Time tagged date as its
	// nanoseconds cut to 32 bits (a wrong day, silently).
	Day       int32  `parquet:"day,date"`
	ServiceID string `parquet:"service_id"`
	Channel   string `parquet:"channel"`
	Status    string `parquet:"status"`
	Count     int64  `parquet:"count"`
}

// CSVHeader is the first line of a CSV export.
var CSVHeader = []string{"day", "service_id", "channel", "status", "count"}

// fileWriter encodes rows into a file, page by page.
type fileWriter interface {
	// Write encodes rows and hands what it can to the underlying writer.
	Write(rows []projection.Row) error
	// Close finishes the file (a Parquet footer) without closing the
	// underlying writer.
	Close() error
}

func newFileWriter(f Format, w io.Writer) (fileWriter, error) {
	switch f {
	case CSV:
		cw := &csvWriter{buf: bufio.NewWriterSize(w, 64<<10)}
		cw.w = csv.NewWriter(cw.buf)
		if err := cw.w.Write(CSVHeader); err != nil {
			return nil, fmt.Errorf("csv header: %w", err)
		}
		return cw, nil
	case Parquet:
		return &parquetWriter{w: parquet.NewGenericWriter[FileRow](w,
			parquet.Compression(&parquet.Zstd),
			// Bounds the rows the writer holds in memory before it writes
			// a row group out.
			parquet.MaxRowsPerRowGroup(64<<10))}, nil
	}
	return nil, fmt.Errorf("%w: format %q", ErrInvalid, f)
}

type csvWriter struct {
	buf *bufio.Writer
	w   *csv.Writer
}

func (c *csvWriter) Write(rows []projection.Row) error {
	for _, r := range rows {
		if err := c.w.Write([]string{r.Day, r.ServiceID, r.Channel, r.Status, strconv.FormatInt(r.Count, 10)}); err != nil {
			return fmt.Errorf("csv: %w", err)
		}
	}
	// Flushed per page, so what progress reports is on its way to storage.
	c.w.Flush()
	if err := c.w.Error(); err != nil {
		return fmt.Errorf("csv: %w", err)
	}
	return c.buf.Flush()
}

func (c *csvWriter) Close() error {
	c.w.Flush()
	if err := c.w.Error(); err != nil {
		return fmt.Errorf("csv: %w", err)
	}
	return c.buf.Flush()
}

type parquetWriter struct {
	w *parquet.GenericWriter[FileRow]
}

func (p *parquetWriter) Write(rows []projection.Row) error {
	out := make([]FileRow, len(rows))
	for i, r := range rows {
		day, err := time.Parse(projection.DateLayout, r.Day)
		if err != nil {
			return fmt.Errorf("parquet: row day %q: %w", r.Day, err)
		}
		out[i] = FileRow{Day: EpochDay(day), ServiceID: r.ServiceID, Channel: r.Channel, Status: r.Status, Count: r.Count}
	}
	if _, err := p.w.Write(out); err != nil {
		return fmt.Errorf("parquet: %w", err)
	}
	return nil
}

func (p *parquetWriter) Close() error {
	if err := p.w.Close(); err != nil {
		return fmt.Errorf("parquet: %w", err)
	}
	return nil
}

// EpochDay is the Parquet DATE of day: days since 1970-01-01.
func EpochDay(day time.Time) int32 {
	// Seconds, not a Duration, which ends 292 years from 1970.
	s := day.Unix()
	d := s / 86400
	if s%86400 < 0 {
		d-- // floor for days before 1970
	}
	return int32(d)
}

// DayOf is the day of a Parquet DATE.
func DayOf(epochDay int32) time.Time {
	return time.Unix(0, 0).UTC().AddDate(0, 0, int(epochDay))
}
