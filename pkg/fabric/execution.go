package fabric

import (
	"context"
	"encoding/json"

	"github.com/agora-platform/agora/pkg/fabric/envelope"
	"github.com/agora-platform/agora/pkg/fabric/internal/execution"
)

// Execution is what a handler may ask about the work it runs in (seed 004
// §23-25): on whose behalf, in which conversation, about what, under which
// release, and, when there is one, for which workflow step and on which
// knowledge. The consumer fills it from the envelope before the handler
// runs, for every handler kind (ExecutionOf).
type Execution struct {
	// Principal is who the work is done for: the envelope's actor (a
	// USER, an AGENT), or, when the envelope names none, the service that
	// produced it as SYSTEM. In a host's background worker (Go), which
	// handles no message, it is the service itself as SYSTEM.
	Principal envelope.Ref
	// CorrelationID is the conversation the message belongs to.
	CorrelationID string
	// CausationID is the id of the message being handled: the cause of
	// this execution, and the causationId of whatever it emits
	// (envelope.Derive). The message's own cause is its env.CausationID.
	CausationID string
	// Entity is the business object the message is about (the envelope's
	// entity), nil when it names none.
	Entity *envelope.Ref
	// Release is the release id the service runs (RELEASE_ID, "dev" by
	// default): what a decision records as the code and configuration
	// that made it.
	Release string
	// ProcessID and Step are the workflow context: the process instance
	// and the step of it the message was emitted for, when a workflow
	// emitted it (the envelope's "workflow" extension); empty otherwise.
	ProcessID, Step string
	// KnowledgeVersion is the version of the knowledge an agent decision
	// read, when the message derives from one (the envelope's
	// "knowledgeVersion" extension); empty otherwise.
	KnowledgeVersion string
}

// The envelope extensions that carry the workflow context and the
// knowledge version. They travel as extensions rather than envelope
// fields: only a workflow and an agent step know them, most messages have
// neither, and a reader of any age keeps an extension (and Encode writes
// it back) without a new envelope version. A consumer reads them
// tolerantly: a malformed or oversized one is ignored, never a reason to
// refuse the message, since nothing the fabric guarantees depends on them.
const (
	extWorkflow  = "workflow"         // {"processId": "…", "step": "…"}
	extKnowledge = "knowledgeVersion" // "…"
	maxExtValue  = 200
)

// ExecutionOf returns the execution ctx belongs to: a handler's ctx (any
// kind: Handler, TxHandler, each Received.Ctx of a batch) and a host
// worker's. Outside the fabric (a test calling a handler itself) it is
// the zero Execution.
func ExecutionOf(ctx context.Context) Execution {
	r, ok := execution.From(ctx)
	if !ok {
		return Execution{}
	}
	x := Execution{Release: r.Release, Principal: envelope.Ref{Type: "SYSTEM", ID: r.Service}}
	env := r.Env
	if env == nil {
		return x
	}
	x.Principal = envelope.Ref{Type: "SYSTEM", ID: env.Producer}
	if env.Actor != nil {
		x.Principal = *env.Actor
	}
	x.CorrelationID, x.CausationID = env.CorrelationID, env.ID
	if env.Entity != nil {
		e := *env.Entity // the handler's copy: the envelope stays as received
		x.Entity = &e
	}
	if raw, ok := env.Extensions[extWorkflow]; ok {
		var w struct{ ProcessID, Step string }
		if json.Unmarshal(raw, &w) == nil && bounded(w.ProcessID) && bounded(w.Step) {
			x.ProcessID, x.Step = w.ProcessID, w.Step
		}
	}
	if raw, ok := env.Extensions[extKnowledge]; ok {
		var v string
		if json.Unmarshal(raw, &v) == nil && bounded(v) {
			x.KnowledgeVersion = v
		}
	}
	return x
}

func bounded(s string) bool { return len(s) <= maxExtValue }
