// Package signature signs and checks the requests other systems send to a
// service's external-event gateway (package gateway): the header carries
// "t=<unix seconds>,v1=<hex HMAC-SHA256 of '<t>.<body>'>" computed with the
// source's shared secret. A source written in Go signs with Sign; the
// gateway checks with Check.
package signature

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// Header is the request header that carries the signature.
const Header = "Agora-Signature"

// ContentType is the media type the gateway takes: a CloudEvent in
// structured mode.
const ContentType = "application/cloudevents+json"

// Sign returns the Header value for body sent at t with secret.
func Sign(secret string, t time.Time, body []byte) string {
	ts := strconv.FormatInt(t.Unix(), 10)
	return "t=" + ts + ",v1=" + mac(secret, ts, body)
}

// Check verifies header against body and secret and returns when it was
// signed; the caller decides how old a signature may be. The signature is
// checked before the time is read, so an unsigned request learns nothing
// of the clock.
func Check(secret, header string, body []byte) (time.Time, error) {
	var ts, sig string
	for _, part := range strings.Split(header, ",") {
		k, v, _ := strings.Cut(strings.TrimSpace(part), "=")
		switch k {
		case "t":
			ts = v
		case "v1":
			sig = v
		}
	}
	if ts == "" || sig == "" {
		return time.Time{}, fmt.Errorf("missing or malformed %s header (t=<unix>,v1=<hmac>)", Header)
	}
	if !hmac.Equal([]byte(sig), []byte(mac(secret, ts, body))) {
		return time.Time{}, errors.New("bad signature")
	}
	sec, err := strconv.ParseInt(ts, 10, 64)
	if err != nil {
		return time.Time{}, errors.New("bad signature timestamp")
	}
	return time.Unix(sec, 0), nil
}

func mac(secret, ts string, body []byte) string {
	m := hmac.New(sha256.New, []byte(secret))
	m.Write([]byte(ts))
	m.Write([]byte{'.'})
	m.Write(body)
	return hex.EncodeToString(m.Sum(nil))
}
