package main

import (
	"context"
	"fmt"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/agora-platform/agora/pkg/fabric/auth"
	"github.com/agora-platform/agora/pkg/fabric/fabrictest"
	"github.com/agora-platform/agora/services/analytics/internal/postgres"
	"github.com/agora-platform/agora/services/analytics/internal/projection"
)

// TestCountsAreFoldedExactly: handlers append counter deltas and a writer
// per tenant folds them into the counters. Two tenants' submissions and
// status changes go through the service while a second folder (as a
// second instance would) competes with the service's own every few
// milliseconds, in small batches. The report is exact as soon as the
// events are handled (it reads counters plus pending deltas), and once
// every delta is folded the counters alone hold the same cells.
func TestCountsAreFoldedExactly(t *testing.T) {
	s := newStack(t).start(t, map[string]string{"ANALYTICS_FOLD_INTERVAL": "20ms"})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	pool := s.Pool
	other := postgres.New(pool, nil) // a fold enqueues nothing
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for ctx.Err() == nil {
			if _, err := other.Fold(ctx, 7); err != nil && ctx.Err() == nil {
				t.Errorf("competing fold: %v", err)
				return
			}
			time.Sleep(3 * time.Millisecond)
		}
	}()
	defer wg.Wait()
	defer cancel()

	day := time.Date(2026, 4, 2, 9, 0, 0, 0, time.UTC)
	want := map[string]map[string]int64{} // tenant → "service/status" → count
	for _, tenantID := range []string{"org-a", "org-b"} {
		want[tenantID] = map[string]int64{}
		for i := range 60 {
			service := fmt.Sprintf("svc-%d", i%3)
			id := s.submit(t, tenantID, service, "web", day)
			status := "submitted"
			switch i % 4 {
			case 1:
				status = "in_progress"
				s.change(t, tenantID, id, status, day.Add(time.Hour), nil)
			case 2:
				s.change(t, tenantID, id, "in_progress", day.Add(time.Hour), nil)
				status = "completed"
				s.change(t, tenantID, id, status, day.Add(2*time.Hour), nil)
			}
			want[tenantID][service+"/"+status]++
		}
	}
	cells := func(rows []projection.Row) map[string]int64 {
		out := map[string]int64{}
		for _, r := range rows {
			out[r.ServiceID+"/"+r.Status] += r.Count
		}
		return out
	}
	equal := func(a, b map[string]int64) bool {
		if len(a) != len(b) {
			return false
		}
		for k, v := range a {
			if b[k] != v {
				return false
			}
		}
		return true
	}
	report := func(tenantID string) map[string]int64 {
		var rep projection.Report
		if s.get(t, "/v1/analytics/requests?from=2026-04-01&to=2026-04-30", s.token(t, tenantID, auth.RoleAttendant), &rep) != http.StatusOK {
			return nil
		}
		return cells(rep.Rows)
	}
	for tenantID, w := range want {
		fabrictest.Eventually(t, 30*time.Second, "the report of "+tenantID, func() bool { return equal(report(tenantID), w) })
	}
	var pending int
	fabrictest.Eventually(t, 20*time.Second, "every delta folded", func() bool {
		if err := pool.QueryRow(ctx, `SELECT count(*) FROM request_count_delta`).Scan(&pending); err != nil {
			t.Fatal(err)
		}
		return pending == 0
	})
	for tenantID, w := range want {
		rows, err := pool.Query(ctx, `SELECT service_id, status, count FROM request_count WHERE tenant_id = $1 AND count > 0`, tenantID)
		if err != nil {
			t.Fatal(err)
		}
		folded := map[string]int64{}
		for _, r := range must(pgx.CollectRows(rows, pgx.RowToStructByPos[struct {
			Service, Status string
			Count           int64
		}])) {
			folded[r.Service+"/"+r.Status] = r.Count
		}
		if !equal(folded, w) {
			t.Errorf("%s: folded counters %v, want %v", tenantID, folded, w)
		}
		if got := report(tenantID); !equal(got, w) {
			t.Errorf("%s: report after the fold %v, want %v", tenantID, got, w)
		}
	}
}

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}
