// Package history reads a tenant's stored events back out of the lake, for
// services that replay them: the lineage index picks a page of events in
// (occurredAt, id) order, and each page fetches the Parquet files those
// events are in, once per file, and rebuilds their envelopes.
package history

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"time"

	"github.com/agora-platform/agora/pkg/fabric/envelope"
	"github.com/agora-platform/agora/services/datalake-ingestion/internal/lake"
	"github.com/agora-platform/agora/services/datalake-ingestion/internal/postgres"
)

// Index locates a tenant's stored events; *postgres.Store is one.
type Index interface {
	History(ctx context.Context, tenantID string, q postgres.HistoryQuery) ([]postgres.Located, error)
}

// Objects reads lake files; objstore.New's store is one.
type Objects interface {
	Get(ctx context.Context, bucket, key string) ([]byte, error)
}

// Opener opens the sealed fields of a stored event; *lake.Restrictions is
// one.
type Opener interface {
	Reveal(env envelope.Envelope) (json.RawMessage, error)
}

// fetchers bounds the files one page fetches at a time.
const fetchers = 4

// Reader reads pages of history.
type Reader struct {
	index   Index
	objects Objects
	opener  Opener
}

// New returns a Reader of the events index locates in objects, their
// sealed fields opened by opener.
func New(index Index, objects Objects, opener Opener) *Reader {
	return &Reader{index: index, objects: objects, opener: opener}
}

// Page is one page of a tenant's history.
type Page struct {
	// Events in (OccurredAt, ID) order.
	Events []envelope.Envelope
	// Next is the position of the page's last event when more may follow
	// it, nil when none does.
	Next *postgres.Position
}

// Page returns up to q.Limit events of tenantID that q selects. Every event
// the index locates is in the page, as it was published: an object that
// cannot be read, a row that is not the event its lineage says, or a
// sealed field that does not open fails the page rather than leave a gap,
// or a wrong payload, a replay would not notice.
func (r *Reader) Page(ctx context.Context, tenantID string, q postgres.HistoryQuery) (Page, error) {
	want := q.Limit
	q.Limit++ // one more tells whether a next page exists
	locs, err := r.index.History(ctx, tenantID, q)
	if err != nil {
		return Page{}, err
	}
	var page Page
	if len(locs) > want {
		locs = locs[:want]
		last := locs[want-1]
		page.Next = &postgres.Position{OccurredAt: last.OccurredAt, EventID: last.EventID}
	}
	files, err := r.fetch(ctx, locs)
	if err != nil {
		return Page{}, err
	}
	page.Events = make([]envelope.Envelope, 0, len(locs))
	for _, l := range locs {
		e, err := eventAt(files[object{l.Bucket, l.ObjectKey}], tenantID, l)
		if err != nil {
			return Page{}, err
		}
		if e.Payload, err = r.opener.Reveal(e); err != nil {
			return Page{}, err
		}
		page.Events = append(page.Events, e)
	}
	return page, nil
}

// object is one lake file.
type object struct{ bucket, key string }

// fetch reads and decodes every file locs point at, each once.
func (r *Reader) fetch(ctx context.Context, locs []postgres.Located) (map[object][]lake.Row, error) {
	files := map[object][]lake.Row{}
	var todo []object
	for _, l := range locs {
		o := object{l.Bucket, l.ObjectKey}
		if _, ok := files[o]; !ok {
			files[o] = nil
			todo = append(todo, o)
		}
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var (
		mu       sync.Mutex
		firstErr error
		wg       sync.WaitGroup
		next     = make(chan object)
	)
	for range min(fetchers, len(todo)) {
		wg.Go(func() {
			for o := range next {
				rows, err := r.read(ctx, o)
				mu.Lock()
				if err != nil && firstErr == nil {
					firstErr = err
					cancel()
				}
				files[o] = rows
				mu.Unlock()
			}
		})
	}
feed:
	for _, o := range todo {
		select {
		case next <- o:
		case <-ctx.Done():
			break feed
		}
	}
	close(next)
	wg.Wait()
	if firstErr == nil {
		firstErr = ctx.Err() // the caller's own context ended
	}
	if firstErr != nil {
		return nil, firstErr
	}
	return files, nil
}

func (r *Reader) read(ctx context.Context, o object) ([]lake.Row, error) {
	data, err := r.objects.Get(ctx, o.bucket, o.key)
	if err != nil {
		return nil, err
	}
	rows, err := lake.Decode(data)
	if err != nil {
		return nil, fmt.Errorf("%s/%s: %w", o.bucket, o.key, err)
	}
	return rows, nil
}

// eventAt returns the envelope of l's row of rows. Its occurredAt is the
// lineage's, to the microsecond, when it agrees with the row's (to the
// millisecond): the page's order and its cursor are the lineage's.
func eventAt(rows []lake.Row, tenantID string, l postgres.Located) (envelope.Envelope, error) {
	if l.RowOffset < 0 || l.RowOffset >= len(rows) {
		return envelope.Envelope{}, fmt.Errorf("event %s: row %d of %s, which has %d rows", l.EventID, l.RowOffset, l.ObjectKey, len(rows))
	}
	row := rows[l.RowOffset]
	if row.EventID != l.EventID || row.TenantID != tenantID || row.Type != l.EventType {
		return envelope.Envelope{}, fmt.Errorf("event %s of tenant %s: row %d of %s is event %s (%s) of tenant %s",
			l.EventID, tenantID, l.RowOffset, l.ObjectKey, row.EventID, row.Type, row.TenantID)
	}
	e, err := row.Envelope()
	if err != nil {
		return envelope.Envelope{}, err
	}
	if at := l.OccurredAt.UTC(); at.Truncate(time.Millisecond).Equal(e.OccurredAt) {
		e.OccurredAt = at
	}
	return e, nil
}
