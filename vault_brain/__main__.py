from vault_brain.cli import main

main()
