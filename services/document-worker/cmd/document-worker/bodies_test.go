package main

import (
	"testing"

	"github.com/agora-platform/agora/pkg/fabric/auth"
	"github.com/agora-platform/agora/pkg/fabric/fabrictest/httpfuzz"
)

// TestMalformedBodies: every route of the worker that reads a JSON body
// (the host's DLQ and replay routes: it has no API of its own) answers
// each malformed one as every other service does, with the same status
// and problem type (see httpfuzz.CheckMalformedBodies).
func TestMalformedBodies(t *testing.T) {
	keys, err := auth.LoadOrCreateDevKeys(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	w := newStack(t).start(map[string]string{"JWT_KEYS": keys.JWKSPath, "LOG_LEVEL": "warn"})
	httpfuzz.New(t, w.URL, keys).CheckMalformedBodies(t)
}
