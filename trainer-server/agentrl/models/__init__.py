"""Models: a run config's `model` section in, a policy and its tokenizer out (loading; precision: where bfloat16
runs in hardware, for the `auto` settings; smollm2: the packaged default model; tiny: random tiny models built in
code for tests)."""
