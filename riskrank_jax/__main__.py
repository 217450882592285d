from riskrank_jax.cli import main

main()
