package procstat

import (
	"os"
	"os/exec"
	"testing"
	"time"
)

func TestRead(t *testing.T) {
	st, ok := Read(os.Getpid())
	if !ok || st.Exited() || st.Start == "" {
		t.Fatalf("this process: %+v, %v", st, ok)
	}
	// A child that exited and is not reaped yet is a zombie.
	cmd := exec.Command("true")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Wait()
	deadline := time.Now().Add(5 * time.Second)
	for {
		if st, ok := Read(cmd.Process.Pid); ok && st.Exited() {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("an exited child never showed as exited")
		}
		time.Sleep(5 * time.Millisecond)
	}
	if _, ok := Read(1 << 30); ok {
		t.Fatal("a pid that cannot exist was read")
	}
}
