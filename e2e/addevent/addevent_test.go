// Package addevent proves what docs/how-to.md promises: a new event type
// takes four hand-written files — its schema, its catalog entry, the
// producer's call and the consumer's handler, each with its test — and
// everything else the platform needs (topology, broker grants, the
// platform topology file, the AsyncAPI document) is derived by the
// generator. The test does it in a scratch copy of the repository.
package addevent_test

import (
	"bytes"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// The worked example, in testdata: survey.answered.v1, published by the
// request service, consumed by analytics on a queue of its own.
var handWritten = map[string]string{
	"pkg/fabric/catalog/survey/survey.answered.v1.json": "survey.answered.v1.json",
	"services/request/internal/survey/survey.go":        "request/survey.go",
	"services/request/internal/survey/survey_test.go":   "request/survey_test.go",
	"services/analytics/internal/survey/survey.go":      "analytics/survey.go",
	"services/analytics/internal/survey/survey_test.go": "analytics/survey_test.go",
	"pkg/fabric/catalog/catalog.yaml":                   "", // edited in place: catalogEdits
	"deploy/topologies/platform.yaml":                   "", // generated
	"deploy/rabbitmq/definitions.json":                  "", // generated
	"deploy/helm/agora/files/acl.json":                  "", // generated
	"docs/asyncapi.json":                                "", // generated
	"docs/openapi/analytics.json":                       "", // generated: its DLQ API names the new queue
}

// generated are the files the generator must have rewritten for the new
// type: its queue and binding, the grants on both sides, the document.
var generated = []string{
	"deploy/topologies/platform.yaml",
	"deploy/rabbitmq/definitions.json",
	"deploy/helm/agora/files/acl.json",
	"docs/asyncapi.json",
	"docs/openapi/analytics.json",
}

// catalogEdits is the catalog entry: the definition, the producer's
// declaration that it publishes the type, the consumer's queue.
func catalogEdits(t *testing.T, catalog, definition string) string {
	t.Helper()
	edits := []struct{ anchor, insert string }{
		{"definitions:\n", definition},
		{"  - name: request\n    clearance: INTERNAL\n    publishes: [", "survey.answered.v1, "},
		{"  - name: analytics\n    clearance: INTERNAL\n    publishes: [report.export.v1, platform.dead-letter-archived.v1]\n    consumes:\n", "      - {queue: analytics.surveys, keys: [survey.answered.v1]}\n"},
	}
	for _, e := range edits {
		if strings.Count(catalog, e.anchor) != 1 {
			t.Fatalf("catalog.yaml no longer has exactly one %q: update the test's edits to the catalog's layout", e.anchor)
		}
		catalog = strings.Replace(catalog, e.anchor, e.anchor+e.insert, 1)
	}
	return catalog
}

func TestAnEventTypeTakesFourHandWrittenFiles(t *testing.T) {
	root := repoRoot(t)
	scratch := filepath.Join(t.TempDir(), "agora")
	before := copyRepo(t, root, scratch)

	for dst, src := range handWritten {
		if src == "" {
			continue
		}
		data, err := os.ReadFile(filepath.Join("testdata", src))
		if err != nil {
			t.Fatal(err)
		}
		write(t, filepath.Join(scratch, dst), data)
	}
	def, err := os.ReadFile(filepath.Join("testdata", "definition.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	catalogPath := filepath.Join(scratch, "pkg/fabric/catalog/catalog.yaml")
	catalog, err := os.ReadFile(catalogPath)
	if err != nil {
		t.Fatal(err)
	}
	write(t, catalogPath, []byte(catalogEdits(t, string(catalog), string(def))))

	// Before the generator runs, make lint's drift check must fail: the
	// derived files no longer match the catalog.
	if out, err := goCmd(scratch, "run", "./deploy/cmd/gendeploy", "-check"); err == nil {
		t.Fatalf("gendeploy -check passed before the generator ran:\n%s", out)
	}
	if out, err := goCmd(scratch, "run", "./deploy/cmd/gendeploy"); err != nil {
		t.Fatalf("the generator: %v\n%s", err, out)
	}
	if out, err := goCmd(scratch, "run", "./deploy/cmd/gendeploy", "-check"); err != nil {
		t.Fatalf("drift after the generator ran: %v\n%s", err, out)
	}

	// Only the four hand-written files (with their tests) and the
	// generated ones differ from the repository.
	changed := diff(t, before, scratch)
	for _, f := range changed {
		if _, ok := handWritten[f]; !ok {
			t.Errorf("%s changed: adding an event must not touch it", f)
		}
	}
	for _, f := range generated {
		if !slices.Contains(changed, f) {
			t.Errorf("the generator did not rewrite %s for the new type", f)
		}
	}
	platform, err := os.ReadFile(filepath.Join(scratch, "deploy/topologies/platform.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(platform, []byte("analytics.surveys")) {
		t.Error("deploy/topologies/platform.yaml has no analytics.surveys queue")
	}

	// It builds and vets, and the event flows through the real broker under
	// the services' own grants (the two packages' tests).
	pkgs := []string{"./pkg/fabric/...", "./deploy/...", "./services/request/...", "./services/analytics/..."}
	if out, err := goCmd(scratch, append([]string{"vet"}, pkgs...)...); err != nil {
		t.Fatalf("go vet: %v\n%s", err, out)
	}
	out, err := goCmd(scratch, "test", "-count=1", "-v", "-run", "Test",
		"./services/request/internal/survey/", "./services/analytics/internal/survey/", "./pkg/fabric/topology/", "./pkg/fabric/registry/")
	if err != nil {
		t.Fatalf("the new type's tests in the scratch copy: %v\n%s", err, out)
	}
	for _, name := range []string{"TestPublishReachesTheAnalyticsQueue", "TestHandlerReceivesAnswers"} {
		if !strings.Contains(string(out), "--- PASS: "+name) {
			t.Errorf("%s did not pass in the scratch copy:\n%s", name, out)
		}
	}
}

func repoRoot(t *testing.T) string {
	t.Helper()
	dir, err := filepath.Abs(".")
	if err != nil {
		t.Fatal(err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.work")); err == nil {
			return dir
		}
		if filepath.Dir(dir) == dir {
			t.Fatal("no go.work above the test's directory")
		}
		dir = filepath.Dir(dir)
	}
}

// copyRepo copies the files git knows of (tracked, or new and not
// ignored) and returns their contents by path.
func copyRepo(t *testing.T, root, dst string) map[string][]byte {
	t.Helper()
	cmd := exec.Command("git", "ls-files", "-z", "--cached", "--others", "--exclude-standard")
	cmd.Dir = root
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("git ls-files (the test copies the repository git knows of): %v", err)
	}
	files := map[string][]byte{}
	for _, f := range strings.Split(strings.TrimRight(string(out), "\x00"), "\x00") {
		data, err := os.ReadFile(filepath.Join(root, f))
		if os.IsNotExist(err) {
			continue // deleted in the working tree
		}
		if err != nil {
			t.Fatal(err)
		}
		files[f] = data
		write(t, filepath.Join(dst, f), data)
	}
	return files
}

// diff lists the files of dir that are new or differ from before.
func diff(t *testing.T, before map[string][]byte, dir string) []string {
	t.Helper()
	var changed []string
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		rel, err := filepath.Rel(dir, p)
		if err != nil {
			return err
		}
		data, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		if old, ok := before[filepath.ToSlash(rel)]; !ok || !bytes.Equal(old, data) {
			changed = append(changed, filepath.ToSlash(rel))
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return changed
}

func write(t *testing.T, path string, data []byte) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
}

// goCmd runs the go tool in dir, the scratch copy's own workspace.
func goCmd(dir string, args ...string) ([]byte, error) {
	cmd := exec.Command("go", args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GOWORK="+filepath.Join(dir, "go.work"), "GOFLAGS=-mod=readonly")
	return cmd.CombinedOutput()
}
