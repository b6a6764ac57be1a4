// Package telemetry wires the fabric into OpenTelemetry: W3C trace context
// carried in AMQP headers, so a trace follows a request from the REST call
// through the outbox and every consumer; the fabric's consumer and
// publisher metrics; and a Prometheus endpoint backed by the OTel
// Prometheus exporter. The service host sets it up; services add spans of
// their own with the tracer the context carries.
package telemetry
