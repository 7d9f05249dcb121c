package runtime

import (
	"time"

	"github.com/simba-go/simba/runtime/internal/vocab"
)

// DefaultConfig returns the defaults: a 15s lease renewed every 5s. It is
// what the zero Config means.
func DefaultConfig() Config { return ConfigFor(15 * time.Second) }

// ConfigFor derives a valid configuration from a lease duration: renewals every
// third of it, the default drift, and a margin and minimum back-off scaled
// down for short leases (50ms and 100ms at 15s; at most a twentieth of the
// lease and a quarter of the renewal interval). It is what
// Config{LeaseDuration: leaseDuration} means.
func ConfigFor(leaseDuration time.Duration) Config {
	return vocab.WithDefaults(Config{LeaseDuration: leaseDuration})
}
