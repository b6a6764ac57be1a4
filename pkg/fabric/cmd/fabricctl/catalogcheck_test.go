package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agora-platform/agora/pkg/fabric/catalog"
)

// gitIn runs git in dir with an identity of its own, so the tests do not
// depend on the machine's git configuration.
func gitIn(t *testing.T, dir string, args ...string) string {
	t.Helper()
	cmd := exec.Command("git", append([]string{
		"-c", "user.email=catalog-check@agora.example", "-c", "user.name=catalog check", "-c", "commit.gpgsign=false",
	}, args...)...)
	cmd.Dir = dir
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("git %v: %v\n%s", args, err, out)
	}
	return strings.TrimSpace(string(out))
}

// scratchRepo returns a git work tree whose first commit has no catalog and
// whose second (HEAD) holds the real catalog at pkg/fabric/catalog.
func scratchRepo(t *testing.T) string {
	t.Helper()
	root := t.TempDir()
	gitIn(t, root, "init", "-q", "-b", "main")
	if err := os.WriteFile(filepath.Join(root, "README.md"), []byte("scratch\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	gitIn(t, root, "add", "README.md")
	gitIn(t, root, "commit", "-q", "-m", "before the catalog")
	dst := filepath.Join(root, "pkg", "fabric", "catalog")
	err := fs.WalkDir(catalog.FS, ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := fs.ReadFile(catalog.FS, p)
		if err != nil {
			return err
		}
		out := filepath.Join(dst, filepath.FromSlash(p))
		if err := os.MkdirAll(filepath.Dir(out), 0o755); err != nil {
			return err
		}
		return os.WriteFile(out, b, 0o644)
	})
	if err != nil {
		t.Fatalf("copy the catalog: %v", err)
	}
	gitIn(t, root, "add", "-A")
	gitIn(t, root, "commit", "-q", "-m", "catalog")
	return root
}

// editSchema rewrites one schema file of the scratch catalog through edit.
func editSchema(t *testing.T, root, file string, edit func(schema map[string]any)) {
	t.Helper()
	p := filepath.Join(root, "pkg", "fabric", "catalog", filepath.FromSlash(file))
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	var schema map[string]any
	if err := json.Unmarshal(b, &schema); err != nil {
		t.Fatalf("%s: %v", file, err)
	}
	edit(schema)
	if b, err = json.MarshalIndent(schema, "", "  "); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, b, 0o644); err != nil {
		t.Fatal(err)
	}
}

func addPriority(schema map[string]any) {
	schema["properties"].(map[string]any)["priority"] = map[string]any{"type": "string"}
}

// removeRequestID removes requestId from request.submitted.v1, the field
// every consumer of that event reads.
func removeRequestID(schema map[string]any) {
	delete(schema["properties"].(map[string]any), "requestId")
	var req []any
	for _, r := range schema["required"].([]any) {
		if r != "requestId" {
			req = append(req, r)
		}
	}
	schema["required"] = req
}

func TestCatalogCheck(t *testing.T) {
	const submitted = "request/request.submitted.v1.json"
	tests := []struct {
		name    string
		edit    func(schema map[string]any) // applied to request.submitted.v1 when set
		args    []string                    // $ROOT: the scratch repository; $OUTSIDE: a directory outside any git work tree
		chdir   bool                        // run from the scratch repo, so --dir defaults from its top level
		wantErr []string                    // nil: the check passes
		wantOut []string
	}{
		{
			name:    "unchanged passes",
			args:    []string{"--against", "HEAD", "--dir", "$ROOT/pkg/fabric/catalog"},
			wantOut: []string{"catalog check against HEAD: no changes"},
		},
		{
			name: "optional property added passes as compatible",
			edit: addPriority,
			args: []string{"--against", "HEAD", "--dir", "$ROOT/pkg/fabric/catalog"},
			wantOut: []string{"COMPATIBLE", "request.submitted.v1", "/properties/priority", "added-optional-field",
				"1 change, 0 incompatible, 1 compatible"},
		},
		{
			name:    "property removed fails",
			edit:    removeRequestID,
			args:    []string{"--against", "HEAD", "--dir", "$ROOT/pkg/fabric/catalog"},
			wantOut: []string{"INCOMPATIBLE", "request.submitted.v1", "/properties/requestId", "removed-field", "1 incompatible"},
			wantErr: []string{"incompatible change must come as a new version", "request.submitted.v2", "side by side"},
		},
		{
			name:    "default --dir is pkg/fabric/catalog under the git top level",
			edit:    removeRequestID,
			args:    []string{"--against", "main"},
			chdir:   true,
			wantOut: []string{"/properties/requestId", "removed-field"},
			wantErr: []string{"request.submitted.v2"},
		},
		{
			name:    "no catalog at the ref passes",
			edit:    addPriority,
			args:    []string{"--against", "HEAD~1", "--dir", "$ROOT/pkg/fabric/catalog"},
			wantOut: []string{"no catalog at HEAD~1", "nothing to compare"},
		},
		{
			name:    "unknown ref fails naming it",
			args:    []string{"--against", "no-such-branch", "--dir", "$ROOT/pkg/fabric/catalog"},
			wantErr: []string{`git ref "no-such-branch" does not exist`},
		},
		{
			name:    "missing --against fails",
			args:    []string{"--dir", "$ROOT/pkg/fabric/catalog"},
			wantErr: []string{"--against REF is required"},
		},
		{
			name:    "catalog outside a git work tree fails",
			args:    []string{"--against", "HEAD", "--dir", "$OUTSIDE"},
			wantErr: []string{"not in a git work tree"},
		},
		{
			name:    "missing catalog directory fails",
			args:    []string{"--against", "HEAD", "--dir", "$ROOT/nowhere"},
			wantErr: []string{"nowhere: not found"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			root := scratchRepo(t)
			if tt.edit != nil {
				editSchema(t, root, submitted, tt.edit)
			}
			if tt.chdir {
				t.Chdir(root)
			}
			places := strings.NewReplacer("$ROOT", root, "$OUTSIDE", t.TempDir())
			args := []string{"catalog", "check"}
			for _, a := range tt.args {
				args = append(args, places.Replace(a))
			}
			var out, errOut bytes.Buffer
			err := run(context.Background(), args, func(string) string { return "" }, &out, &errOut)
			switch {
			case tt.wantErr == nil && err != nil:
				t.Fatalf("catalog check = %v, want it to pass\n%s%s", err, out.String(), errOut.String())
			case tt.wantErr != nil && err == nil:
				t.Fatalf("catalog check = nil error, want it to fail\n%s", out.String())
			}
			for _, w := range tt.wantErr {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("catalog check error = %v, want it to contain %q", err, w)
				}
			}
			for _, w := range tt.wantOut {
				if !strings.Contains(out.String(), w) {
					t.Errorf("catalog check output =\n%s\nwant it to contain %q", out.String(), w)
				}
			}
		})
	}
}

// TestMakeLintCatalogGate runs the Makefile's catalog-check target (which
// make lint depends on) against a scratch repository, with fabricctl built
// from this source: it passes on the committed catalog and fails, naming the
// field, once a committed schema loses a field.
func TestMakeLintCatalogGate(t *testing.T) {
	makeBin, err := exec.LookPath("make")
	if err != nil {
		t.Fatalf("make is needed to test make lint's gate: %v", err)
	}
	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Fatalf("go is needed to build fabricctl: %v", err)
	}
	makefile := filepath.Join(gitIn(t, ".", "rev-parse", "--show-toplevel"), "Makefile")
	if _, err := os.Stat(makefile); err != nil {
		t.Fatalf("the repository's Makefile: %v", err)
	}
	bin := filepath.Join(t.TempDir(), "fabricctl")
	if out, err := exec.Command(goBin, "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build fabricctl: %v\n%s", err, out)
	}
	root := scratchRepo(t)
	runMake := func(args ...string) (string, error) {
		cmd := exec.Command(makeBin, append([]string{"-f", makefile, "-C", root}, append(args, "FABRICCTL_RUN="+bin)...)...)
		out, err := cmd.CombinedOutput()
		return string(out), err
	}

	if out, err := runMake("-n", "lint"); err != nil || !strings.Contains(out, bin+" catalog check --against") {
		t.Fatalf("make -n lint = %v, want it to run %s catalog check\n%s", err, bin, out)
	}
	if out, err := runMake("catalog-check"); err != nil {
		t.Fatalf("make catalog-check on the committed catalog = %v, want success\n%s", err, out)
	}
	editSchema(t, root, "request/request.submitted.v1.json", removeRequestID)
	out, err := runMake("catalog-check")
	if err == nil {
		t.Fatalf("make catalog-check after removing a field = success, want failure\n%s", out)
	}
	for _, w := range []string{"/properties/requestId", "removed-field", "request.submitted.v2"} {
		if !strings.Contains(out, w) {
			t.Errorf("make catalog-check output =\n%s\nwant it to contain %q", out, w)
		}
	}
}
