"""TextWorldExpress CoinCollector through env.gym: a text game nobody here wrote, trained from a config alone."""
