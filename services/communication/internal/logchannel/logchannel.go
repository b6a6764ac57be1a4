// Package logchannel is the stand-in adapter for channels whose providers
// (SMS gateways, WhatsApp Business) are outside parties we do not run
// locally: it logs and records each message instead of sending it.
package logchannel

import (
	"context"
	"log/slog"
	"sync"

	"github.com/agora-platform/agora/services/communication/internal/notify"
)

// Sender records messages of one channel. It is safe for concurrent use.
type Sender struct {
	channel notify.Channel
	log     *slog.Logger
	mu      sync.Mutex
	sent    []notify.Message
}

// New returns a recording sender for channel.
func New(channel notify.Channel, log *slog.Logger) *Sender {
	return &Sender{channel: channel, log: log}
}

// Send logs m (without its address: it is personal data) and records it.
// It never fails.
func (s *Sender) Send(_ context.Context, m notify.Message) error {
	s.log.Info("message handed to the fake channel adapter", "channel", s.channel,
		"notification", m.NotificationID, "request", m.RequestID)
	s.mu.Lock()
	s.sent = append(s.sent, m)
	s.mu.Unlock()
	return nil
}

// Sent returns the messages recorded so far.
func (s *Sender) Sent() []notify.Message {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]notify.Message(nil), s.sent...)
}
