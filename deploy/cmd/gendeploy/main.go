// Command gendeploy writes the deployment files generated from the one
// declarative source of access rules (package acl, package postgres):
//
//	deploy/rabbitmq/definitions.json   users, permissions, topic permissions, topology (local dev)
//	deploy/postgres/roles.sql          one role per service schema (local dev passwords)
//	deploy/helm/agora/files/acl.json   the same permissions and topology, passwords left to values
//	deploy/helm/agora/files/alerts.yml              copy of deploy/observability/alerts.yml
//	deploy/helm/agora/files/dashboards/platform.json  copy of deploy/observability/dashboards/platform.json
//
// The chart cannot read files outside its directory, hence the copies.
// Run from the repository root: go run ./deploy/cmd/gendeploy [-check].
// With -check it writes nothing and fails when a file differs.
package main

import (
	"bytes"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/agora-platform/agora/deploy/acl"
	"github.com/agora-platform/agora/deploy/observability"
	"github.com/agora-platform/agora/deploy/postgres"
)

func main() {
	if err := run(os.Args[1:], os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "gendeploy:", err)
		os.Exit(1)
	}
}

func run(args []string, stdout io.Writer) error {
	fs := flag.NewFlagSet("gendeploy", flag.ContinueOnError)
	root := fs.String("root", ".", "repository root")
	check := fs.Bool("check", false, "fail when a generated file is out of date instead of writing it")
	if err := fs.Parse(args); err != nil {
		return err
	}
	files, err := Generated()
	if err != nil {
		return err
	}
	for _, f := range files {
		path := filepath.Join(*root, f.Path)
		old, _ := os.ReadFile(path)
		if bytes.Equal(old, f.Data) {
			fmt.Fprintf(stdout, "unchanged %s\n", f.Path)
			continue
		}
		if *check {
			return fmt.Errorf("%s is out of date: run go run ./deploy/cmd/gendeploy", f.Path)
		}
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			return fmt.Errorf("write %s: %w", f.Path, err)
		}
		if err := os.WriteFile(path, f.Data, 0o644); err != nil {
			return fmt.Errorf("write %s: %w", f.Path, err)
		}
		fmt.Fprintf(stdout, "wrote %s\n", f.Path)
	}
	return nil
}

// File is one generated file, its path relative to the repository root.
type File struct {
	Path string
	Data []byte
}

// Generated renders every generated file.
func Generated() ([]File, error) {
	defs, err := acl.PlatformDefinitions()
	if err != nil {
		return nil, err
	}
	chart, err := acl.ChartACL()
	if err != nil {
		return nil, err
	}
	return []File{
		{Path: "deploy/rabbitmq/definitions.json", Data: defs},
		{Path: "deploy/postgres/roles.sql", Data: []byte(postgres.PlatformSQL())},
		{Path: "deploy/helm/agora/files/acl.json", Data: chart},
		{Path: "deploy/helm/agora/files/alerts.yml", Data: observability.ChartRules()},
		{Path: "deploy/helm/agora/files/dashboards/platform.json", Data: observability.Dashboard},
	}, nil
}
