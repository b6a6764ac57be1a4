package main

import (
	"testing"

	"github.com/agora-platform/agora/pkg/fabric/fabrictest/httpfuzz"
)

// TestMalformedBodies: every route of the service that reads a JSON body
// (the host's DLQ and replay routes: its own routes read none) answers
// each malformed one as every other service does, with the same status and
// problem type (see httpfuzz.CheckMalformedBodies).
func TestMalformedBodies(t *testing.T) {
	s := startStack(t, map[string]string{"LOG_LEVEL": "warn"})
	httpfuzz.New(t, s.url, s.Keys).CheckMalformedBodies(t)
}
