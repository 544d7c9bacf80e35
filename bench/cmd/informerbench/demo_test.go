package main

import "testing"

func TestDemoWording(t *testing.T) {
	if got := sooner(1, 3); got != "3.0× sooner than" {
		t.Errorf("sooner(1, 3) = %q", got)
	}
	if got := sooner(2, 1); got != "2.0× later than" {
		t.Errorf("sooner(2, 1) = %q: a slower warm restart must not read as sooner", got)
	}
	if got := cpuShare(0, 0.4); got != "under 10 ms against 0.40 s" {
		t.Errorf("cpuShare(0, 0.4) = %q", got)
	}
	if got := cpuShare(0.1, 0.05); got != "2.0×" {
		t.Errorf("cpuShare(0.1, 0.05) = %q: more CPU than the reference must not read as a fraction", got)
	}
	if got := cpuShare(0.05, 1.4); got != "1/28" {
		t.Errorf("cpuShare(0.05, 1.4) = %q", got)
	}
}
