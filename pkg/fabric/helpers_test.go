package fabric_test

import "encoding/json"

func jsonUnmarshal(b []byte, v any) error { return json.Unmarshal(b, v) }

// jsonRaw lets a raw payload be passed where envelope.New marshals a value.
func jsonRaw(b []byte) json.RawMessage { return json.RawMessage(b) }
