package broker_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/agora-platform/agora/pkg/fabric/broker"
	"github.com/agora-platform/agora/pkg/fabric/fabrictest"
)

// deadNode is an address where nothing listens (port 1 is never a broker).
const deadNode = "amqp://agora:not-a-real-secret@127.0.0.1:1/"

func liveNode() string {
	env := fabrictest.EnvFrom(os.Getenv)
	return fmt.Sprintf("amqp://%s:%s@%s/", env.User, env.Pass, env.AMQPHost)
}

func TestSplitURLs(t *testing.T) {
	for _, c := range []struct {
		in   string
		want []string
	}{
		{"amqp://a/", []string{"amqp://a/"}},
		{"amqp://a/, amqp://b/ ,amqp://c/", []string{"amqp://a/", "amqp://b/", "amqp://c/"}},
		{" , ", nil},
		{"", nil},
	} {
		got := broker.SplitURLs(c.in)
		if strings.Join(got, "|") != strings.Join(c.want, "|") {
			t.Errorf("SplitURLs(%q) = %q, want %q", c.in, got, c.want)
		}
	}
}

// With a dead node listed beside a live one, every Dial reaches the live
// one quickly, whichever node the rotation starts at. Dialling only the
// first address, or only a random one, fails some of the ten rounds.
func TestDialFailsOverToTheNextNode(t *testing.T) {
	for _, list := range []string{deadNode + "," + liveNode(), liveNode() + "," + deadNode} {
		for i := 0; i < 10; i++ {
			ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
			c, err := broker.Dial(ctx, list, broker.Options{Name: t.Name(), MinBackoff: 2 * time.Second})
			cancel()
			if err != nil {
				t.Fatalf("Dial(%s) round %d: %v", redacted(list), i, err)
			}
			if c.Connects() != 1 {
				t.Errorf("connects = %d, want 1", c.Connects())
			}
			c.Close()
		}
	}
}

// A Dial that cannot reach any node names the node it tried last, and never
// its password.
func TestDialErrorsHideThePassword(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
	defer cancel()
	_, err := broker.Dial(ctx, deadNode+","+deadNode, broker.Options{MinBackoff: 50 * time.Millisecond})
	if err == nil {
		t.Fatal("Dial to dead nodes succeeded")
	}
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("error %v, want the context's deadline", err)
	}
	if strings.Contains(err.Error(), "not-a-real-secret") {
		t.Errorf("error shows the password: %v", err)
	}
	if !strings.Contains(err.Error(), "127.0.0.1:1") {
		t.Errorf("error does not name the node: %v", err)
	}
}

func TestDialRefusesAnEmptyList(t *testing.T) {
	if _, err := broker.Dial(context.Background(), " , ", broker.Options{}); err == nil {
		t.Fatal("Dial with no address succeeded")
	}
}

func redacted(list string) string { return strings.ReplaceAll(list, "not-a-real-secret", "xxx") }
