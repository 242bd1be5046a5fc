"""The mechanics every lesson uses: the checked config, accumulation, the loops, training runs; torch only."""
