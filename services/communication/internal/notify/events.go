package notify

import (
	"github.com/agora-platform/agora/pkg/fabric/catalog/payload"
	"github.com/agora-platform/agora/pkg/fabric/enum"
	"github.com/agora-platform/agora/pkg/fabric/envelope"
)

// Producer is the envelope producer of the events this service emits.
const Producer = "communication-service"

// SentEvent derives communication.notification-sent.v1, the outcome st
// (Sent or Failed) of n, from the message that asked for n, keeping the
// conversation's correlation.
func SentEvent(cause envelope.Envelope, n Notification, st Status) (envelope.Envelope, error) {
	p := payload.NotificationSent{NotificationID: n.ID, RequestID: n.RequestID,
		Channel: enum.Of(payload.NotificationChannel(n.Channel)), Status: string(st)}
	return envelope.Derive(cause, p.MessageType(), Producer, p)
}
