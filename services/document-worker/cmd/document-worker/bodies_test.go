package main

import (
	"testing"

	"github.com/agora-platform/agora/pkg/fabric/fabrictest/httpfuzz"
)

// TestMalformedBodies: every route of the worker that reads a JSON body
// (the host's DLQ and replay routes: it has no API of its own) answers
// each malformed one as every other service does, with the same status
// and problem type (see httpfuzz.CheckMalformedBodies).
func TestMalformedBodies(t *testing.T) {
	s := newStack(t)
	httpfuzz.New(t, s.start(map[string]string{"LOG_LEVEL": "warn"}).URL, s.Keys).CheckMalformedBodies(t)
}
