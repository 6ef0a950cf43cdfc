from vault_brain.entry import main

main()
