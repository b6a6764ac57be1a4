package main

import (
	"cmp"
	"context"
	"encoding/base64"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agora-platform/agora/deploy/deploytest"
	"github.com/agora-platform/agora/pkg/fabric/fabrictest"
)

// workItem is an item of GET /v1/tasks (and the task claim and release
// return).
type workItem struct {
	ID           string     `json:"id"`
	ProcessID    string     `json:"processId"`
	Step         string     `json:"step"`
	AssigneeRole string     `json:"assigneeRole"`
	Status       string     `json:"status"`
	DueAt        time.Time  `json:"dueAt"`
	SLABreached  bool       `json:"slaBreached"`
	CompletedBy  string     `json:"completedBy"`
	Assignee     string     `json:"assignee"`
	ClaimedAt    *time.Time `json:"claimedAt"`
	RequestID    string     `json:"requestId"`
	ServiceID    string     `json:"serviceId"`
	SLAState     string     `json:"slaState"`
}

type workPage struct {
	Items      []workItem `json:"items"`
	NextCursor string     `json:"nextCursor"`
}

func worklist(t *testing.T, base, token, query string) workPage {
	t.Helper()
	resp := do(t, http.MethodGet, base+"/v1/tasks?"+query, token, nil, nil)
	if resp.Status != http.StatusOK {
		t.Fatalf("GET /v1/tasks?%s = %d %s", query, resp.Status, resp.Body)
	}
	var page workPage
	resp.JSON(t, &page)
	return page
}

// allPages follows nextCursor from query to the last page and returns the
// ids in the order served; it fails on a page larger than limit.
func allPages(t *testing.T, base, token, query string, limit int) []string {
	t.Helper()
	var ids []string
	cursor := ""
	for pages := 0; ; pages++ {
		if pages > 100 {
			t.Fatalf("more than 100 pages of %d for %q", limit, query)
		}
		q := fmt.Sprintf("%s&limit=%d", query, limit)
		if cursor != "" {
			q += "&cursor=" + url.QueryEscape(cursor)
		}
		page := worklist(t, base, token, q)
		if len(page.Items) > limit {
			t.Fatalf("page of %d items, limit %d", len(page.Items), limit)
		}
		if page.NextCursor != "" && len(page.Items) != limit {
			t.Fatalf("a short page (%d of %d) with a next cursor", len(page.Items), limit)
		}
		ids = append(ids, itemIDs(page.Items)...)
		if page.NextCursor == "" {
			return ids
		}
		cursor = page.NextCursor
	}
}

func itemIDs(items []workItem) []string {
	out := []string{}
	for _, it := range items {
		out = append(out, it.ID)
	}
	return out
}

func sortedIDs(ids []string) []string {
	out := slices.Clone(ids)
	slices.Sort(out)
	return out
}

func taskAction(t *testing.T, base, token, taskID, action string) deploytest.Response {
	t.Helper()
	return do(t, http.MethodPost, base+"/v1/tasks/"+taskID+"/"+action, token, nil, nil)
}

// mustAct claims or releases and returns the task, failing on anything but 200.
func mustAct(t *testing.T, base, token, taskID, action string) workItem {
	t.Helper()
	resp := taskAction(t, base, token, taskID, action)
	if resp.Status != http.StatusOK {
		t.Fatalf("%s task %s = %d %s", action, taskID, resp.Status, resp.Body)
	}
	var it workItem
	resp.JSON(t, &it)
	return it
}

// expectClaimed checks a 409 problem naming who holds the task.
func expectClaimed(t *testing.T, resp deploytest.Response, holder string) {
	t.Helper()
	expectProblem(t, resp, http.StatusConflict)
	var p struct {
		Errors struct {
			Assignee string `json:"assignee"`
		} `json:"errors"`
	}
	resp.JSON(t, &p)
	if p.Errors.Assignee != holder {
		t.Errorf("409 names assignee %q, want %q: %s", p.Errors.Assignee, holder, resp.Body)
	}
}

// openTasks submits one request per service of tenant and returns, in the
// same order, the first task of each process once it exists.
func (p *platform) openTasks(t *testing.T, base, tenant string, services ...string) []taskView {
	t.Helper()
	var reqs []string
	for _, svc := range services {
		reqs = append(reqs, requestIDOf(t, p.submitted(t, tenant, "citizen-1", svc)))
	}
	staff := p.Token(t, tenant, "operator-1", "operator")
	var out []taskView
	for _, id := range reqs {
		out = append(out, waitProcess(t, base, staff, id).Tasks[0])
	}
	return out
}

func writeDefinitions(t *testing.T, json string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "definitions.json")
	if err := os.WriteFile(path, []byte(json), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// worklistDefinitions: one single-step definition per SLA, so each task's
// due date (and SLA state) follows from its service.
const worklistDefinitions = `{"default":"soon","definitions":[
	{"id":"soon","services":["soon"],"steps":[{"name":"triage","assigneeRole":"attendant","sla":"1h"}]},
	{"id":"later","services":["later"],"steps":[{"name":"review","assigneeRole":"attendant","sla":"10h"}]},
	{"id":"ops","services":["ops"],"steps":[{"name":"audit","assigneeRole":"operator","sla":"5h"}]},
	{"id":"late","services":["late"],"steps":[{"name":"urgent","assigneeRole":"attendant","sla":"1s"}]}]}`

func TestWorklist(t *testing.T) {
	p := newPlatform(t)
	extra := map[string]string{"WORKFLOW_DEFINITIONS": writeDefinitions(t, worklistDefinitions), "SLA_CHECK_INTERVAL": "100ms"}
	base := p.start(t, extra) // due soon: the default 4 h
	extra["SLA_DUE_SOON"] = "6h"
	wide := p.start(t, extra) // a second instance on the same schema, due soon within 6 h

	// org-a: late (1 s, attendant), soon ×2 (1 h, attendant), ops ×2 (5 h,
	// operator), later ×2 (10 h, attendant). org-b: one soon, one ops.
	a := p.openTasks(t, base, "org-a", "late", "soon", "soon", "ops", "ops", "later", "later")
	late, soon, ops, later := a[0], a[1:3], a[3:5], a[5:7]
	b := p.openTasks(t, base, "org-b", "soon", "ops")
	operatorA := p.Token(t, "org-a", "operator-1", "operator")
	attendantA := p.Token(t, "org-a", "attendant-1", "attendant")
	attendantA2 := p.Token(t, "org-a", "attendant-2", "attendant")
	operatorB := p.Token(t, "org-b", "operator-1", "operator")
	var allA []string
	for _, tk := range a {
		allA = append(allA, tk.ID)
	}
	attendantTasks := []string{late.ID, soon[0].ID, soon[1].ID, later[0].ID, later[1].ID}
	ids := func(tasks ...taskView) []string {
		var out []string
		for _, tk := range tasks {
			out = append(out, tk.ID)
		}
		return sortedIDs(out)
	}
	byDue := func(items []workItem) bool {
		return slices.IsSortedFunc(items, func(x, y workItem) int {
			return cmp.Or(x.DueAt.Compare(y.DueAt), strings.Compare(x.ID, y.ID))
		})
	}

	t.Run("tenants are walled off", func(t *testing.T) {
		full := worklist(t, base, operatorA, "limit=200")
		if got := sortedIDs(itemIDs(full.Items)); !slices.Equal(got, sortedIDs(allA)) || full.NextCursor != "" {
			t.Errorf("org-a operator sees %v (next %q), want org-a's %v", got, full.NextCursor, sortedIDs(allA))
		}
		// The tenant is the token's; query parameters naming another do nothing.
		for _, q := range []string{"tenantId=org-b", "tenant_id=org-b", "tenant=org-b"} {
			if got := sortedIDs(itemIDs(worklist(t, base, operatorA, q).Items)); !slices.Equal(got, sortedIDs(allA)) {
				t.Errorf("?%s: org-a operator sees %v, want org-a's own", q, got)
			}
		}
		if got := sortedIDs(itemIDs(worklist(t, base, operatorB, "").Items)); !slices.Equal(got, ids(b...)) {
			t.Errorf("org-b operator sees %v, want %v", got, ids(b...))
		}
		for _, it := range full.Items {
			if it.RequestID == "" || it.ServiceID == "" || it.ProcessID == "" {
				t.Errorf("item %+v lacks its request, service or process", it)
			}
		}
	})

	t.Run("sorted by due date", func(t *testing.T) {
		items := worklist(t, base, operatorA, "").Items
		if !byDue(items) {
			t.Errorf("items not by due date then id: %+v", items)
		}
		if len(items) != len(allA) || items[0].ID != late.ID || items[len(items)-1].Step != "review" {
			t.Errorf("order %v, want the 1 s task first and a 10 h one last", itemIDs(items))
		}
	})

	t.Run("role scoping", func(t *testing.T) {
		cases := []struct {
			name, token, query string
			want               []string
		}{
			{"attendant sees the attendant role's tasks", attendantA, "", attendantTasks},
			{"attendant asking for the operator role", attendantA, "role=operator", nil},
			{"operator filters by role", operatorA, "role=operator", ids(ops...)},
			{"operator filters the attendant role", operatorA, "role=attendant", attendantTasks},
			{"both roles see everything", p.Token(t, "org-a", "lead-1", "attendant", "operator"), "", allA},
		}
		for _, tc := range cases {
			t.Run(tc.name, func(t *testing.T) {
				if got := sortedIDs(itemIDs(worklist(t, base, tc.token, tc.query).Items)); !slices.Equal(got, sortedIDs(tc.want)) {
					t.Errorf("got %v, want %v", got, sortedIDs(tc.want))
				}
			})
		}
	})

	// The 1 s task is marked breached by the SLA watcher: a positive signal
	// before the SLA filters are read.
	var breached workItem
	fabrictest.Eventually(t, 20*time.Second, "the 1 s task to be breached", func() bool {
		items := worklist(t, base, operatorA, "sla=breached").Items
		if len(items) == 1 {
			breached = items[0]
		}
		return len(items) == 1
	})
	if breached.ID != late.ID || !breached.SLABreached || breached.SLAState != "breached" {
		t.Fatalf("breached = %+v, want the 1 s task", breached)
	}

	// One soon task completed by an attendant who never claimed it: still
	// allowed for an unclaimed task.
	if resp := complete(t, base, attendantA2, soon[0].ID, ""); resp.Status != http.StatusOK {
		t.Fatalf("complete an unclaimed task = %d %s", resp.Status, resp.Body)
	}

	t.Run("status", func(t *testing.T) {
		done := worklist(t, base, operatorA, "status=completed").Items
		if len(done) != 1 || done[0].ID != soon[0].ID || done[0].CompletedBy != "attendant-2" {
			t.Errorf("completed = %+v, want the completed soon task", done)
		}
		open := sortedIDs(itemIDs(worklist(t, base, operatorA, "status=open").Items))
		want := ids(late, soon[1], ops[0], ops[1], later[0], later[1])
		if !slices.Equal(open, want) {
			t.Errorf("open = %v, want %v", open, want)
		}
	})

	t.Run("sla", func(t *testing.T) {
		cases := []struct {
			name, url, token, query string
			want                    []string
		}{
			{"due soon within 4 h", base, operatorA, "sla=due_soon", ids(soon[1])},
			{"on time", base, operatorA, "sla=on_time", ids(soon[0], ops[0], ops[1], later[0], later[1])},
			{"breached", base, operatorA, "sla=breached", ids(late)},
			{"due soon within 6 h (SLA_DUE_SOON)", wide, operatorA, "sla=due_soon", ids(soon[1], ops[0], ops[1])},
			{"open and on time", base, operatorA, "sla=on_time&status=open", ids(ops[0], ops[1], later[0], later[1])},
			{"attendant, due soon within 6 h", wide, attendantA, "sla=due_soon", ids(soon[1])},
		}
		for _, tc := range cases {
			t.Run(tc.name, func(t *testing.T) {
				items := worklist(t, tc.url, tc.token, tc.query).Items
				if got := sortedIDs(itemIDs(items)); !slices.Equal(got, tc.want) {
					t.Errorf("got %v, want %v", got, tc.want)
				}
				for _, it := range items {
					if want := strings.TrimPrefix(strings.Split(tc.query, "&")[0], "sla="); it.SLAState != want {
						t.Errorf("item %s slaState %q, want %q", it.ID, it.SLAState, want)
					}
				}
			})
		}
	})

	t.Run("assignee", func(t *testing.T) {
		mustAct(t, base, attendantA, later[0].ID, "claim")
		cases := []struct {
			name, token, query string
			want               []string
		}{
			{"me", attendantA, "assignee=me", ids(later[0])},
			{"a subject, asked by an operator", operatorA, "assignee=attendant-1", ids(later[0])},
			{"me, for someone who claimed nothing", attendantA2, "assignee=me", nil},
			{"nobody of that name", operatorA, "assignee=someone-else", nil},
			{"with another filter", attendantA, "assignee=me&sla=due_soon", nil},
		}
		for _, tc := range cases {
			t.Run(tc.name, func(t *testing.T) {
				items := worklist(t, base, tc.token, tc.query).Items
				if got := sortedIDs(itemIDs(items)); !slices.Equal(got, sortedIDs(tc.want)) {
					t.Errorf("got %v, want %v", got, sortedIDs(tc.want))
				}
				for _, it := range items {
					if it.Assignee != "attendant-1" || it.ClaimedAt == nil {
						t.Errorf("item %+v, want claimed by attendant-1", it)
					}
				}
			})
		}
	})

	t.Run("pages", func(t *testing.T) {
		// Ties: three tasks due at the same instant, so pages also break
		// inside a run of equal due dates (ordered by id).
		tie := time.Now().Add(7 * time.Hour).UTC().Truncate(time.Microsecond)
		if _, err := p.Pool.Exec(context.Background(), "UPDATE task SET due_at = $1 WHERE id = ANY($2::uuid[])",
			tie, []string{ops[1].ID, later[0].ID, later[1].ID}); err != nil {
			t.Fatal(err)
		}
		full := worklist(t, base, operatorA, "limit=200").Items
		if !byDue(full) || len(full) != len(allA) {
			t.Fatalf("full list %+v, want all %d by due date then id", full, len(allA))
		}
		ties := 0
		for _, it := range full {
			if it.DueAt.Equal(tie) {
				ties++
			}
		}
		if ties != 3 {
			t.Fatalf("%d tasks due at the tie, want 3", ties)
		}
		for _, limit := range []int{1, 2, 3, 7} {
			got := allPages(t, base, operatorA, "", limit)
			if !slices.Equal(got, itemIDs(full)) {
				t.Errorf("pages of %d: %v, want %v", limit, got, itemIDs(full))
			}
		}
		att := itemIDs(worklist(t, base, attendantA, "").Items)
		if got := allPages(t, base, attendantA, "status=open", 2); !slices.Equal(sortedIDs(got), ids(late, soon[1], later[0], later[1])) {
			t.Errorf("attendant's open tasks in pages of 2: %v (all: %v)", got, att)
		}
		if got := worklist(t, base, operatorA, "limit=7"); len(got.Items) != 7 || got.NextCursor != "" {
			t.Errorf("a page holding exactly the rest: %d items, next %q; want 7 and none", len(got.Items), got.NextCursor)
		}
		if got := worklist(t, base, operatorA, "").Items; len(got) != len(allA) {
			t.Errorf("default limit: %d items, want all %d", len(got), len(allA))
		}
	})

	t.Run("bad query values", func(t *testing.T) {
		long := strings.Repeat("a", 256)
		cases := []struct {
			query string
			names []string
		}{
			{"status=closed", []string{"status"}},
			{"status=OPEN", []string{"status"}},
			{"role=citizen", []string{"role"}},
			{"sla=late", []string{"sla"}},
			{"limit=0", []string{"limit"}},
			{"limit=201", []string{"limit"}},
			{"limit=-1", []string{"limit"}},
			{"limit=ten", []string{"limit"}},
			{"limit=99999999999999999999", []string{"limit"}},
			{"cursor=not-a-cursor", []string{"cursor"}},
			{"cursor=e30", []string{"cursor"}}, // {}
			{"cursor=" + url.QueryEscape(encodeCursorForTest(`{"t":"2026-01-01T00:00:00Z","id":"x"}`)), []string{"cursor"}},
			{"assignee=" + long, []string{"assignee"}},
			{"status=open&status=completed", []string{"status"}},
			{"sla=breached&sla=on_time", []string{"sla"}},
			{"status=x&limit=0&sla=y", []string{"limit", "sla", "status"}},
		}
		for _, tc := range cases {
			name := tc.query
			if len(name) > 60 {
				name = name[:60]
			}
			t.Run(name, func(t *testing.T) {
				resp := do(t, http.MethodGet, base+"/v1/tasks?"+tc.query, attendantA, nil, nil)
				expectProblem(t, resp, http.StatusBadRequest)
				var pr struct {
					Detail string         `json:"detail"`
					Errors map[string]any `json:"errors"`
				}
				resp.JSON(t, &pr)
				var got []string
				for k := range pr.Errors {
					got = append(got, k)
				}
				slices.Sort(got)
				if !slices.Equal(got, tc.names) || !strings.Contains(pr.Detail, strings.Join(tc.names, ", ")) {
					t.Errorf("problem %s names %v, want %v", resp.Body, got, tc.names)
				}
			})
		}
	})

	t.Run("who may ask", func(t *testing.T) {
		expectProblem(t, do(t, http.MethodGet, base+"/v1/tasks", "", nil, nil), http.StatusUnauthorized)
		expectProblem(t, do(t, http.MethodGet, base+"/v1/tasks", p.Token(t, "org-a", "citizen-1", "citizen"), nil, nil), http.StatusForbidden)
	})
}

func encodeCursorForTest(json string) string {
	return base64.RawURLEncoding.EncodeToString([]byte(json))
}

func TestTaskClaims(t *testing.T) {
	p := newPlatform(t)
	base := p.start(t, nil)
	// iptu-segunda-via: one attendant step; building-permit's second step
	// is the operators'.
	tasks := p.openTasks(t, base, "org-a", "iptu-segunda-via", "iptu-segunda-via", "iptu-segunda-via", "building-permit")
	x, y, race, permit := tasks[0], tasks[1], tasks[2], tasks[3]
	other := p.openTasks(t, base, "org-b", "iptu-segunda-via")[0]
	ana := p.Token(t, "org-a", "ana", "attendant")
	bia := p.Token(t, "org-a", "bia", "attendant")
	operator := p.Token(t, "org-a", "olga", "operator")
	if resp := complete(t, base, ana, permit.ID, ""); resp.Status != http.StatusOK {
		t.Fatalf("complete document-check = %d %s", resp.Status, resp.Body)
	}
	var operatorTask workItem
	for _, it := range worklist(t, base, operator, "role=operator").Items {
		operatorTask = it
	}
	if operatorTask.Step != "technical-review" {
		t.Fatalf("operator task = %+v, want technical-review", operatorTask)
	}
	status := func(t *testing.T, id string) workItem {
		t.Helper()
		for _, it := range worklist(t, base, operator, "limit=200").Items {
			if it.ID == id {
				return it
			}
		}
		t.Fatalf("task %s not on the operator's worklist", id)
		return workItem{}
	}

	t.Run("claim, re-claim, conflicts, release", func(t *testing.T) {
		first := mustAct(t, base, ana, x.ID, "claim")
		if first.Assignee != "ana" || first.ClaimedAt == nil || first.Status != "open" {
			t.Fatalf("claimed = %+v, want open, assignee ana, claimedAt set", first)
		}
		again := mustAct(t, base, ana, x.ID, "claim")
		if again.Assignee != "ana" || !again.ClaimedAt.Equal(*first.ClaimedAt) {
			t.Errorf("re-claim = %+v, want unchanged (claimedAt %s)", again, first.ClaimedAt)
		}
		expectClaimed(t, taskAction(t, base, bia, x.ID, "claim"), "ana")
		expectClaimed(t, taskAction(t, base, operator, x.ID, "claim"), "ana")
		expectClaimed(t, taskAction(t, base, bia, x.ID, "release"), "ana")
		// Completion by anyone but the assignee, an operator included.
		expectClaimed(t, complete(t, base, bia, x.ID, ""), "ana")
		expectClaimed(t, complete(t, base, operator, x.ID, `{"outcome":"approved"}`), "ana")
		if got := status(t, x.ID); got.Status != "open" || got.Assignee != "ana" {
			t.Fatalf("after refused completions: %+v, want open and ana's", got)
		}

		released := mustAct(t, base, ana, x.ID, "release")
		if released.Assignee != "" || released.ClaimedAt != nil {
			t.Errorf("released = %+v, want no assignee", released)
		}
		if again := mustAct(t, base, ana, x.ID, "release"); again.Assignee != "" {
			t.Errorf("second release = %+v, want still unclaimed", again)
		}
		if got := mustAct(t, base, bia, x.ID, "claim"); got.Assignee != "bia" {
			t.Errorf("claim after release = %+v, want bia's", got)
		}
		if got := mustAct(t, base, operator, x.ID, "release"); got.Assignee != "" {
			t.Errorf("operator release = %+v, want unclaimed", got)
		}
		if got := status(t, x.ID); got.Assignee != "" || got.ClaimedAt != nil {
			t.Errorf("listed after release: %+v, want unclaimed", got)
		}
	})

	t.Run("the assignee completes", func(t *testing.T) {
		mustAct(t, base, bia, y.ID, "claim")
		resp := complete(t, base, bia, y.ID, "")
		if resp.Status != http.StatusOK {
			t.Fatalf("complete by the assignee = %d %s", resp.Status, resp.Body)
		}
		got := status(t, y.ID)
		if got.Status != "completed" || got.CompletedBy != "bia" || got.Assignee != "bia" {
			t.Errorf("completed task = %+v, want completed by its assignee bia", got)
		}
		expectProblem(t, taskAction(t, base, bia, y.ID, "claim"), http.StatusConflict)
		expectProblem(t, taskAction(t, base, bia, y.ID, "release"), http.StatusConflict)
		expectProblem(t, taskAction(t, base, operator, y.ID, "release"), http.StatusConflict)
	})

	t.Run("an operator may claim any role's task", func(t *testing.T) {
		if got := mustAct(t, base, operator, operatorTask.ID, "claim"); got.Assignee != "olga" {
			t.Errorf("operator claim = %+v", got)
		}
		mustAct(t, base, operator, operatorTask.ID, "release")
	})

	t.Run("refusals", func(t *testing.T) {
		cases := []struct {
			name, token, task, action string
			status                    int
		}{
			{"no token", "", x.ID, "claim", 401},
			{"citizen", p.Token(t, "org-a", "citizen-1", "citizen"), x.ID, "claim", 403},
			{"attendant on an operator step", ana, operatorTask.ID, "claim", 403},
			{"attendant releasing an operator step", ana, operatorTask.ID, "release", 403},
			{"another tenant's task: claim", ana, other.ID, "claim", 404},
			{"another tenant's task: release", operator, other.ID, "release", 404},
			{"another tenant's task: complete", operator, other.ID, "complete", 404},
			{"not a task id", ana, "nope", "claim", 404},
			{"unknown task", ana, deploytest.NewID(t), "release", 404},
		}
		for _, tc := range cases {
			t.Run(tc.name, func(t *testing.T) {
				expectProblem(t, taskAction(t, base, tc.token, tc.task, tc.action), tc.status)
			})
		}
		resp := do(t, http.MethodPost, base+"/v1/tasks/"+x.ID+"/claim", ana, strings.NewReader(`{"assignee":"bia"}`),
			map[string]string{"Content-Type": "application/json"})
		expectProblem(t, resp, http.StatusBadRequest)
		if got := worklist(t, base, p.Token(t, "org-b", "operator-1", "operator"), "").Items; len(got) != 1 || got[0].Assignee != "" {
			t.Errorf("org-b's task after org-a's attempts: %+v, want one, unclaimed", got)
		}
		if got := status(t, x.ID); got.Assignee != "" {
			t.Errorf("task after refused claims: %+v, want unclaimed", got)
		}
	})

	t.Run("ten attendants claim at once: one wins", func(t *testing.T) {
		const n = 10
		tokens := make([]string, n)
		for i := range tokens {
			tokens[i] = p.Token(t, "org-a", fmt.Sprintf("racer-%d", i), "attendant")
		}
		results := race10(t, base, race.ID, tokens)
		var winners []int
		conflicts := 0
		for i, r := range results {
			switch r.Status {
			case http.StatusOK:
				winners = append(winners, i)
			case http.StatusConflict:
				conflicts++
			default:
				t.Errorf("racer-%d: %d %s", i, r.Status, r.Body)
			}
		}
		if len(winners) != 1 || conflicts != n-1 {
			t.Fatalf("%d won (%v), %d conflicts; want exactly 1 and %d", len(winners), winners, conflicts, n-1)
		}
		winner := fmt.Sprintf("racer-%d", winners[0])
		for i, r := range results {
			if i != winners[0] {
				expectClaimed(t, r, winner)
			}
		}
		if got := status(t, race.ID); got.Assignee != winner {
			t.Errorf("task after the race: %+v, want %s's", got, winner)
		}
	})

	t.Run("one attendant claims ten times at once: all succeed, one claim", func(t *testing.T) {
		mustAct(t, base, operator, race.ID, "release")
		tokens := make([]string, 10)
		for i := range tokens {
			tokens[i] = ana
		}
		results := race10(t, base, race.ID, tokens)
		var at *time.Time
		for i, r := range results {
			if r.Status != http.StatusOK {
				t.Fatalf("claim %d = %d %s", i, r.Status, r.Body)
			}
			var it workItem
			r.JSON(t, &it)
			if it.Assignee != "ana" || it.ClaimedAt == nil || (at != nil && !it.ClaimedAt.Equal(*at)) {
				t.Errorf("claim %d = %+v, want ana's, claimed once (at %v)", i, it, at)
			}
			at = it.ClaimedAt
		}
	})
}

// race10 sends POST /v1/tasks/{id}/claim once per token, all released at
// the same moment, and returns the answers in token order.
func race10(t *testing.T, base, taskID string, tokens []string) []deploytest.Response {
	t.Helper()
	results := make([]deploytest.Response, len(tokens))
	errs := make([]error, len(tokens))
	start := make(chan struct{})
	var wg sync.WaitGroup
	for i, tok := range tokens {
		wg.Add(1)
		go func() {
			defer wg.Done()
			req, err := http.NewRequest(http.MethodPost, base+"/v1/tasks/"+taskID+"/claim", nil)
			if err != nil {
				errs[i] = err
				return
			}
			req.Header.Set("Authorization", "Bearer "+tok)
			<-start
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				errs[i] = err
				return
			}
			defer resp.Body.Close()
			body, err := io.ReadAll(resp.Body)
			results[i], errs[i] = deploytest.Response{Status: resp.StatusCode, Header: resp.Header, Body: body}, err
		}()
	}
	close(start)
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("claim %d: %v", i, err)
		}
	}
	return results
}

func TestDueSoonConfig(t *testing.T) {
	for _, tc := range []struct {
		value string
		want  time.Duration
		ok    bool
	}{{"", 4 * time.Hour, true}, {"90m", 90 * time.Minute, true}, {"0", 0, false}, {"-1h", 0, false}, {"soon", 0, false}} {
		t.Run("SLA_DUE_SOON="+tc.value, func(t *testing.T) {
			c, err := loadConfig(func(k string) string {
				if k == "SLA_DUE_SOON" {
					return tc.value
				}
				return ""
			})
			if tc.ok != (err == nil) || (tc.ok && c.DueSoon != tc.want) {
				t.Errorf("loadConfig = %v, %v; want %v (ok %v)", c.DueSoon, err, tc.want, tc.ok)
			}
			if err != nil && !strings.Contains(err.Error(), "SLA_DUE_SOON") {
				t.Errorf("error %q does not name SLA_DUE_SOON", err)
			}
		})
	}
}
