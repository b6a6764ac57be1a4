package consumer

import (
	"testing"

	"github.com/agora-platform/agora/pkg/fabric/registry"
)

// TestChannelKnowsTheCatalogsValues: the values this build calls known are
// exactly the ones its catalog lists, so a value is "unknown" only when a
// newer producer added it.
func TestChannelKnowsTheCatalogsValues(t *testing.T) {
	reg, err := registry.Default()
	if err != nil {
		t.Fatal(err)
	}
	d, _ := reg.Lookup("request.submitted.v1")
	values := d.ExtensibleEnums["/channel"]
	if len(values) == 0 {
		t.Fatal("request.submitted.v1 /channel is not an extensible enumeration in the catalog")
	}
	for _, v := range values {
		if !Channel(v).Known() {
			t.Errorf("Channel(%q).Known() = false, but the catalog lists it", v)
		}
	}
	for _, v := range []string{"kiosk", "", "WEB"} {
		if Channel(v).Known() {
			t.Errorf("Channel(%q).Known() = true, but the catalog does not list it", v)
		}
	}
}
