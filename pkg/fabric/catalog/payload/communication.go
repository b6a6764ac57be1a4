package payload

import "github.com/agora-platform/agora/pkg/fabric/enum"

// Send is the command communication.send.v1. RecipientRef is the citizen
// id, resolved by the communication service: commands never carry an
// address.
type Send struct {
	Channel      string         `json:"channel"`
	RecipientRef string         `json:"recipientRef"`
	Template     string         `json:"template"`
	RequestID    string         `json:"requestId,omitempty"`
	Params       map[string]any `json:"params,omitempty"`
}

// MessageType returns the catalog type of the payload.
func (Send) MessageType() string { return "communication.send.v1" }

// NotificationSent is communication.notification-sent.v1.
type NotificationSent struct {
	NotificationID string                         `json:"notificationId"`
	RequestID      string                         `json:"requestId,omitempty"`
	Channel        enum.Open[NotificationChannel] `json:"channel"`
	Status         string                         `json:"status"`
}

// MessageType returns the catalog type of the payload.
func (NotificationSent) MessageType() string { return "communication.notification-sent.v1" }

// NotificationChannel is how a notification reached the citizen
// (extensible: new delivery channels need no new contract version).
type NotificationChannel string

// Known reports whether c is a channel this build was written for.
func (c NotificationChannel) Known() bool {
	switch c {
	case "email", "sms", "whatsapp":
		return true
	}
	return false
}
