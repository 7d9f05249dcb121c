package runtime_test

import (
	"context"
	"flag"
	"fmt"
	"os"

	"github.com/simba-go/simba/backends/memory"
	"github.com/simba-go/simba/runtime"
)

// Lease settings from the environment, overridden by flags: a service
// reads SIMBA_LEASE_DURATION and the other variables, then lets
// -simba-lease-duration and the other flags override them. Errors name
// the variable or the flag at fault.
func ExampleConfigFromEnv() {
	// As a deployment would set them:
	os.Setenv("SIMBA_LEASE_DURATION", "6s")
	os.Setenv("SIMBA_RENEW_INTERVAL", "2s")
	defer os.Unsetenv("SIMBA_LEASE_DURATION")
	defer os.Unsetenv("SIMBA_RENEW_INTERVAL")

	cfg, err := runtime.ConfigFromEnv("SIMBA")
	if err != nil {
		fmt.Println(err)
		return
	}
	fs := flag.NewFlagSet("service", flag.ExitOnError)
	runtime.RegisterConfigFlags(fs, &cfg)
	fs.Parse([]string{"-simba-lease-duration", "9s"}) // os.Args[1:] in a real program

	client, err := runtime.NewClient(memory.New(), cfg)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer client.Close(context.Background())
	got := client.Config()
	fmt.Println("lease:", got.LeaseDuration, "renew every:", got.RenewInterval)

	os.Setenv("SIMBA_RENEW_INTERVAL", "5s") // two renewals no longer fit in a 6s lease
	_, err = runtime.ConfigFromEnv("SIMBA")
	fmt.Println(err)
	// Output:
	// lease: 9s renew every: 2s
	// simba: invalid config: SIMBA_RENEW_INTERVAL = 5s; want <= 2.945s: two renewals must fit in LeaseDuration × (1 − Drift) − Margin = 5.89s
}
