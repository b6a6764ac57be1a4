// Package notify holds the communication domain: contacts, notifications,
// channels and the message texts sent to citizens. It knows nothing of
// databases or brokers.
package notify

import (
	"errors"
	"fmt"
	"net/mail"
	"regexp"
	"strings"
	"time"

	"github.com/agora-platform/agora/pkg/fabric"
)

// Channel is how a message reaches a citizen.
type Channel string

// Channels the platform knows (communication.send.v1 enum).
const (
	Email    Channel = "email"
	SMS      Channel = "sms"
	WhatsApp Channel = "whatsapp"
)

// ParseChannel returns the channel named s, or ErrInvalid.
func ParseChannel(s string) (Channel, error) {
	switch c := Channel(s); c {
	case Email, SMS, WhatsApp:
		return c, nil
	}
	return "", fmt.Errorf("%w: channel %q is not email, sms or whatsapp", ErrInvalid, s)
}

// Status is where a notification stands.
type Status string

// Notification statuses.
const (
	Pending Status = "pending"
	// Held: waiting for the end of the citizen's quiet hours.
	Held   Status = "held"
	Sent   Status = "sent"
	Failed Status = "failed"
	// Withheld: not sent, for want of the citizen's consent.
	Withheld Status = "withheld"
	// Coalesced: never sent, superseded while held by a newer notice of
	// the same request and channel that carries its news (see Coalesce).
	Coalesced Status = "coalesced"
)

// Failure reasons recorded on failed notifications.
const (
	ReasonNoContact       = "no-contact"
	ReasonRejected        = "rejected"
	ReasonUnknownTemplate = "unknown-template"
	ReasonNoAdapter       = "no-adapter"
)

// Errors of the domain. Callers test them with errors.Is.
var (
	// ErrInvalid: input breaks a rule (bad e-mail, unknown channel…); of
	// the fabric's kind, so answered 422.
	ErrInvalid = fmt.Errorf("%w", fabric.ErrInvalid)
	// ErrNotFound: no such contact or notification in the tenant (404).
	ErrNotFound = fmt.Errorf("%w", fabric.ErrNotFound)
	// ErrRejected: the channel refused the message for good (SMTP 5xx):
	// retrying cannot help. Any other Send error is taken as temporary.
	ErrRejected = errors.New("message rejected by the channel")
	// ErrUnknownTemplate: a send command named a template we do not have.
	ErrUnknownTemplate = errors.New("unknown template")
)

// Contact is how a citizen of a tenant wants to be reached. The
// communication service is the only owner of these addresses: events carry
// the citizen id, never the address.
type Contact struct {
	CitizenID string  `json:"citizenId"`
	Email     string  `json:"email,omitempty"`
	Phone     string  `json:"phone,omitempty"`
	Preferred Channel `json:"preferredChannel"`
	// ProgressNotices is the citizen's consent to notices about their
	// requests' progress; nil means given (see WantsProgressNotices).
	ProgressNotices *bool `json:"progressNotices,omitempty"`
	// QuietHours, when set, hold SMS and WhatsApp back (see Decide).
	QuietHours *QuietHours `json:"quietHours,omitempty"`
	UpdatedAt  time.Time   `json:"updatedAt"`
}

var phonePattern = regexp.MustCompile(`^\+[1-9][0-9]{6,14}$`)

// Validate normalises c and returns ErrInvalid (wrapped, naming the field)
// when an address is malformed or the preferred channel has no address.
func (c *Contact) Validate() error {
	c.Email = strings.TrimSpace(c.Email)
	c.Phone = strings.TrimSpace(c.Phone)
	if c.CitizenID == "" || len(c.CitizenID) > 200 {
		return fmt.Errorf("%w: citizenId must have 1 to 200 characters", ErrInvalid)
	}
	if c.Email != "" {
		a, err := mail.ParseAddress(c.Email)
		if err != nil || a.Address != c.Email || len(c.Email) > 254 {
			return fmt.Errorf("%w: email %q is not a plain address", ErrInvalid, c.Email)
		}
	}
	if c.Phone != "" && !phonePattern.MatchString(c.Phone) {
		return fmt.Errorf("%w: phone must be E.164 (+5511999990000)", ErrInvalid)
	}
	if c.Preferred == "" {
		c.Preferred = Email
	}
	if _, err := ParseChannel(string(c.Preferred)); err != nil {
		return err
	}
	if _, ok := c.Address(c.Preferred); !ok {
		return fmt.Errorf("%w: preferredChannel %s has no address", ErrInvalid, c.Preferred)
	}
	if c.QuietHours != nil {
		return c.QuietHours.Validate()
	}
	return nil
}

// Address returns the contact's address on ch.
func (c Contact) Address(ch Channel) (string, bool) {
	switch ch {
	case Email:
		return c.Email, c.Email != ""
	case SMS, WhatsApp:
		return c.Phone, c.Phone != ""
	}
	return "", false
}

// Notification is one message to one citizen, with its delivery state.
type Notification struct {
	ID            string     `json:"id"`
	RequestID     string     `json:"requestId,omitempty"`
	CitizenID     string     `json:"citizenId"`
	Channel       Channel    `json:"channel"`
	Template      string     `json:"template"`
	Status        Status     `json:"status"`
	Attempts      int        `json:"attempts"`
	LastError     string     `json:"lastError,omitempty"`
	FailureReason string     `json:"failureReason,omitempty"`
	CreatedAt     time.Time  `json:"createdAt"`
	SentAt        *time.Time `json:"sentAt,omitempty"`
	// CoalescedInto is the notice that carries a coalesced one's news.
	CoalescedInto string `json:"coalescedInto,omitempty"`
}

// Message is what a channel adapter delivers.
type Message struct {
	NotificationID string
	RequestID      string
	Channel        Channel
	To             string
	Subject        string
	Body           string
}

// IdempotencyKey is what a provider deduplicates the sends of m by: an
// SMS or WhatsApp gateway's Idempotency-Key header, the local part of an
// e-mail's Message-ID. It is the notification id, which is derived from
// the tenant and the message that asked for the notice, never drawn per
// attempt, so every send of one notification carries the same key: a
// redelivery after a crash between the provider's acceptance and the
// commit, a batch rolled back and run again, a held notice dispatched
// again. A key per attempt would make each of those a second message.
func (m Message) IdempotencyKey() string { return m.NotificationID }

// Template names.
const (
	TemplateConfirmation = "request-confirmation"
	TemplateStatus       = "request-status"
)

// Render returns the subject and body of template with params, or
// ErrUnknownTemplate. Texts carry the protocol number the citizen quotes
// at a counter, never form contents.
func Render(template string, params map[string]string) (subject, body string, err error) {
	switch template {
	case TemplateConfirmation:
		p := params["protocol"]
		if p == "" {
			return "", "", fmt.Errorf("%w: %s needs the protocol parameter", ErrInvalid, template)
		}
		return "Request received: protocol " + p,
			"We received your request.\r\nProtocol number: " + p +
				"\r\nKeep this number to follow your request.\r\n", nil
	case TemplateReceivedStatus:
		p, s := params["protocol"], params["status"]
		if p == "" || s == "" {
			return "", "", fmt.Errorf("%w: %s needs the protocol and status parameters", ErrInvalid, template)
		}
		return "Request received: protocol " + p + ", now " + s,
			"We received your request.\r\nProtocol number: " + p +
				"\r\nKeep this number to follow your request.\r\nIts status is now: " + s + "\r\n", nil
	case TemplateStatus:
		p, s := params["protocol"], params["status"]
		if s == "" {
			return "", "", fmt.Errorf("%w: %s needs the status parameter", ErrInvalid, template)
		}
		subject = "Your request is now " + s
		if p != "" {
			subject = "Request " + p + " is now " + s
		}
		return subject, "The status of your request changed to: " + s + "\r\n", nil
	}
	return "", "", fmt.Errorf("%w: %q", ErrUnknownTemplate, template)
}
