// Package rigtest runs a seed example to its end against a vhost and a
// database schema of its own, for the examples' tests.
package rigtest

import (
	"bytes"
	"context"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/agora-platform/agora/pkg/fabric/fabrictest"
)

// Run is an example's run function.
type Run func(ctx context.Context, args []string, getenv func(string) string, stdout io.Writer) error

// Check runs run with deploy/topologies/<system>.yaml and fails t unless
// it returns nil and its output holds every line of want.
func Check(t *testing.T, run Run, system string, want []string) {
	t.Helper()
	env := fabrictest.EnvFrom(os.Getenv)
	vh := fabrictest.NewVhost(t, env)
	db := fabrictest.NewSchema(t, env)
	getenv := func(k string) string {
		switch k {
		case "AMQP_URL":
			return vh.URL
		case "DATABASE_URL":
			return env.DatabaseURL
		}
		return ""
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var out bytes.Buffer
	file := filepath.Join("..", "..", "..", "..", "deploy", "topologies", system+".yaml")
	if err := run(ctx, []string{"--topology", file, "--schema", db.Name}, getenv, &out); err != nil {
		t.Fatalf("run: %v\n%s", err, out.String())
	}
	t.Log(out.String())
	for _, w := range want {
		if !strings.Contains(out.String(), w) {
			t.Errorf("output lacks %q", w)
		}
	}
}
