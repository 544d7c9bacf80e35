package main

import "testing"

func TestDemoWording(t *testing.T) {
	if got := timesOf(1, 4); got != "0.25×" {
		t.Errorf("timesOf(1, 4) = %q", got)
	}
	if got := timesOf(1, 0); got != "an unknown multiple of" {
		t.Errorf("timesOf(1, 0) = %q: no reference must not divide by zero", got)
	}
}
