from riskrank_jax.cli.main import main

main()
