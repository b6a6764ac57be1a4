package messaging_test

import (
	"errors"
	"fmt"
	"testing"

	"github.com/agora-platform/agora/pkg/fabric"
	"github.com/agora-platform/agora/services/document-worker/internal/document"
	"github.com/agora-platform/agora/services/document-worker/internal/messaging"
)

func TestClassify(t *testing.T) {
	cases := []struct {
		err  error
		want fabric.Class
	}{
		{document.ErrUnavailable, fabric.ClassTransient},
		{document.ErrCorrupt, fabric.ClassPermanent},
		{document.ErrUnsupported, fabric.ClassPermanent},
		{document.ErrForeignObject, fabric.ClassPermanent},
		{document.ErrChecksum, fabric.ClassPermanent},
		{document.ErrNotFound, fabric.ClassPermanent},
		{errors.New("something else"), fabric.ClassUnknown},
	}
	for _, c := range cases {
		wrapped := fmt.Errorf("document x: %w", c.err)
		if got := fabric.ClassOf(messaging.Classify(wrapped)); got != c.want {
			t.Errorf("Classify(%v) class = %s, want %s", wrapped, got, c.want)
		}
	}
}
