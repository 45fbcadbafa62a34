package vmm

import (
	"strings"
	"testing"
)

// Every bad field names its flag; a bad PSCI mode does not.
func TestConfigValidatePSCINamesFlag(t *testing.T) {
	for _, mode := range []PSCIMode{"bogus", ""} {
		c := validConfig()
		c.PSCI = mode
		err := c.Validate()
		if err == nil || !strings.Contains(err.Error(), "--psci") {
			t.Errorf("PSCI %q: Validate() = %v, want an error naming --psci", mode, err)
		}
	}
}
