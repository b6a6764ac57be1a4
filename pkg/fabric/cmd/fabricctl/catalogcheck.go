package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"strings"
	"text/tabwriter"

	"github.com/agora-platform/agora/pkg/fabric/internal/compat"
	"github.com/agora-platform/agora/pkg/fabric/registry"
)

// defaultCatalogDir is where the catalog lives, relative to the git top level.
const defaultCatalogDir = "pkg/fabric/catalog"

// runCatalogCheck compares the catalog in the working tree with the one at a
// git ref and fails when a change needs a new type version.
func runCatalogCheck(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	flags := flag.NewFlagSet("catalog check", flag.ContinueOnError)
	flags.SetOutput(stderr)
	against := flags.String("against", "", "git ref (branch, tag, commit) holding the catalog to compare with (required)")
	dir := flags.String("dir", "", "catalog directory in the working tree (default: "+defaultCatalogDir+" under the git top level)")
	if err := flags.Parse(args); err != nil {
		return err
	}
	if flags.NArg() > 0 {
		return fmt.Errorf("catalog check: unexpected arguments %q", flags.Args())
	}
	ref := *against
	if ref == "" {
		return fmt.Errorf("catalog check: --against REF is required (e.g. --against origin/main)")
	}
	if strings.HasPrefix(ref, "-") {
		return fmt.Errorf("catalog check: %q is not a git ref", ref)
	}
	if *dir == "" {
		top, err := git(ctx, "", "rev-parse", "--show-toplevel")
		if err != nil {
			return fmt.Errorf("catalog check: find the git top level (or pass --dir): %w", err)
		}
		*dir = filepath.Join(strings.TrimSpace(string(top)), filepath.FromSlash(defaultCatalogDir))
	}
	if st, err := os.Stat(*dir); err != nil || !st.IsDir() {
		return fmt.Errorf("catalog check: catalog directory %s: not found in the working tree", *dir)
	}

	oldCat, found, cleanup, err := catalogAt(ctx, *dir, ref)
	if err != nil {
		return fmt.Errorf("catalog check: %w", err)
	}
	defer cleanup()
	if !found {
		fmt.Fprintf(stdout, "catalog check: no catalog at %s (first commit of the catalog?): nothing to compare, passing\n", ref)
		return nil
	}
	// The new catalog must also be one the fabric can load: a compatible
	// change that does not compile would fail every service at start.
	if _, err := registry.Load(os.DirFS(*dir)); err != nil {
		return fmt.Errorf("catalog check: the catalog in %s does not load: %w", *dir, err)
	}
	rep, err := compat.Compare(oldCat, os.DirFS(*dir))
	if err != nil {
		return fmt.Errorf("catalog check against %s: %w", ref, err)
	}
	printReport(stdout, ref, rep)
	if !rep.HasIncompatible() {
		return nil
	}
	var advice []string
	for _, typ := range rep.IncompatibleTypes() {
		next, err := compat.NextVersion(typ)
		if err != nil {
			next = "a new version of " + typ
		}
		advice = append(advice, fmt.Sprintf("%s (keep %s as it is at %s; put the change in %s)", typ, typ, ref, next))
	}
	return fmt.Errorf("catalog check against %s: incompatible changes to %s: an incompatible change must come as a new version "+
		"(<type> with .v<N+1>) published side by side with the old one, which stays until its consumers have moved "+
		"(see docs/contract-evolution.md)", ref, strings.Join(advice, "; "))
}

// printReport writes one line per change and a summary line.
func printReport(w io.Writer, ref string, rep compat.Report) {
	incompatible := 0
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	for _, c := range rep.Changes {
		if c.Verdict == compat.Incompatible {
			incompatible++
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", strings.ToUpper(string(c.Verdict)), c.Type, c.Path, c.Rule, c.Detail)
	}
	tw.Flush()
	if len(rep.Changes) == 0 {
		fmt.Fprintf(w, "catalog check against %s: no changes\n", ref)
		return
	}
	noun := "changes"
	if len(rep.Changes) == 1 {
		noun = "change"
	}
	fmt.Fprintf(w, "catalog check against %s: %d %s, %d incompatible, %d compatible\n",
		ref, len(rep.Changes), noun, incompatible, len(rep.Changes)-incompatible)
}

// catalogAt copies the catalog directory dir as it is at ref into a
// temporary directory and returns it as an fs.FS, with a cleanup that removes
// the copy. found is false when ref has no catalog.yaml there, as before the
// catalog's first commit. It fails when dir is not inside a git work tree or
// ref does not name a commit.
func catalogAt(ctx context.Context, dir, ref string) (cat fs.FS, found bool, cleanup func(), err error) {
	cleanup = func() {}
	top, err := git(ctx, dir, "rev-parse", "--show-toplevel")
	if err != nil {
		return nil, false, cleanup, fmt.Errorf("catalog directory %s is not in a git work tree: %w", dir, err)
	}
	prefix, err := git(ctx, dir, "rev-parse", "--show-prefix")
	if err != nil {
		return nil, false, cleanup, fmt.Errorf("locate %s in its git work tree: %w", dir, err)
	}
	root, pathspec := strings.TrimSpace(string(top)), strings.TrimSpace(string(prefix))
	if pathspec == "" {
		pathspec = "."
	}
	// Resolve once, so every file is read from the same commit.
	commit, err := git(ctx, root, "rev-parse", "--verify", "--quiet", ref+"^{commit}")
	if err != nil {
		return nil, false, cleanup, fmt.Errorf("git ref %q does not exist in %s (fetch it, or name a branch, tag or commit that does)", ref, root)
	}
	rev := strings.TrimSpace(string(commit))
	list, err := git(ctx, root, "ls-tree", "-r", "-z", "--name-only", "--full-name", rev, "--", pathspec)
	if err != nil {
		return nil, false, cleanup, fmt.Errorf("list the catalog at %s: %w", ref, err)
	}
	base := strings.TrimSuffix(pathspec, "/")
	if base == "." {
		base = ""
	}
	var names []string
	for _, name := range strings.Split(string(list), "\x00") {
		if name == "" {
			continue
		}
		rel := strings.TrimPrefix(strings.TrimPrefix(name, base), "/")
		if rel == "catalog.yaml" {
			found = true
		}
		names = append(names, name)
	}
	if !found {
		return nil, false, cleanup, nil
	}
	tmp, err := os.MkdirTemp("", "fabricctl-catalog-")
	if err != nil {
		return nil, false, cleanup, fmt.Errorf("copy the catalog at %s: %w", ref, err)
	}
	cleanup = func() { os.RemoveAll(tmp) }
	for _, name := range names {
		blob, err := git(ctx, root, "cat-file", "blob", rev+":"+name)
		if err != nil {
			cleanup()
			return nil, false, func() {}, fmt.Errorf("read %s at %s: %w", name, ref, err)
		}
		rel := strings.TrimPrefix(strings.TrimPrefix(name, base), "/")
		dst := filepath.Join(tmp, filepath.FromSlash(path.Clean(rel)))
		if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
			cleanup()
			return nil, false, func() {}, fmt.Errorf("copy %s at %s: %w", name, ref, err)
		}
		if err := os.WriteFile(dst, blob, 0o644); err != nil {
			cleanup()
			return nil, false, func() {}, fmt.Errorf("copy %s at %s: %w", name, ref, err)
		}
	}
	return os.DirFS(tmp), true, cleanup, nil
}

// git runs git in dir ("" for the current directory) and returns its
// standard output; the error carries git's standard error.
func git(ctx context.Context, dir string, args ...string) ([]byte, error) {
	cmd := exec.CommandContext(ctx, "git", args...)
	cmd.Dir = dir
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		var exit *exec.ExitError
		if msg := strings.TrimSpace(stderr.String()); msg != "" && errors.As(err, &exit) {
			return nil, fmt.Errorf("git %s: %s", strings.Join(args, " "), msg)
		}
		return nil, fmt.Errorf("git %s: %w", strings.Join(args, " "), err)
	}
	return stdout.Bytes(), nil
}
