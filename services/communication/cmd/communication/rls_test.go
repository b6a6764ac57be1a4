package main

import (
	"context"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/agora-platform/agora/pkg/fabric/fabrictest"
)

// TestRowLevelSecurity: with a confirmation held (a window long enough to
// keep it in notification_hold), every table of the schema, the
// dispatcher's index and the fabric's included, keeps org-a's rows from
// any other tenant's session.
func TestRowLevelSecurity(t *testing.T) {
	s := newStack(t).start(t, map[string]string{"NOTICE_COALESCE_WINDOW": "10m"})
	const tenantID, citizen = "org-a", "citizen-rls"
	s.putContact(t, tenantID, citizen, map[string]any{"email": "rls@example.org"})
	requestID := uuid.NewString()
	s.Publish(t, submittedEvent(t, tenantID, citizen, requestID, "AG-2026-900001"))
	fabrictest.Eventually(t, 20*time.Second, "the confirmation held", func() bool {
		var n int
		if err := s.Pool.QueryRow(context.Background(), `SELECT count(*) FROM notification_hold WHERE tenant_id = $1`, tenantID).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n == 1
	})
	s.CheckRowSecurity(t, tenantID, nil)
}
