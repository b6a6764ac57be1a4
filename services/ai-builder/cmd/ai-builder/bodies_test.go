package main

import (
	"testing"

	"github.com/agora-platform/agora/pkg/fabric/fabrictest/httpfuzz"
)

// TestMalformedBodies: every route of the service that reads a JSON body
// answers each malformed one as every other service does, with the same
// status and problem type (see httpfuzz.CheckMalformedBodies).
func TestMalformedBodies(t *testing.T) {
	s := newStack(t)
	httpfuzz.New(t, s.start(map[string]string{"LOG_LEVEL": "warn"}), s.Keys).CheckMalformedBodies(t)
}
