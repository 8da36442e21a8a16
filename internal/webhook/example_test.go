package webhook_test

import (
	"fmt"
	"time"

	"github.com/formica-run/formica/internal/webhook"
)

// A secret signs a message's id, timestamp and body; the receiver, with
// the same secret, computes the same header.
func ExampleSecret_Sign() {
	secret, err := webhook.ParseSecret("whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw")
	if err != nil {
		fmt.Println(err)
		return
	}
	sent := time.Unix(1614265330, 0)
	fmt.Println(secret.Sign("msg_p5jXN8AQM9LWM0D4loKWxJek", sent, []byte(`{"test": 2432232314}`)))
	fmt.Println(secret)
	_, err = webhook.ParseSecret("whsec_c2hvcnQ=")
	fmt.Println(err)
	// Output:
	// v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE=
	// whsec_…
	// webhook: bad secret: its key is 5 bytes, want 24 to 64
}
