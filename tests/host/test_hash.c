/* The key hash is lowercase hex SHA-256, and says when it cannot be made. */
#include <criterion/criterion.h>
#include <sbx/sbx.h>

Test(hash, known_vectors)
{
    char h[SBX_KEY_HASH_LEN + 1];
    cr_assert_eq(sbx_key_hash("", h), SBX_OK);
    cr_assert_str_eq(h, "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
    cr_assert_eq(sbx_key_hash("abc", h), SBX_OK);
    cr_assert_str_eq(h, "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
}

Test(hash, bad_arguments_give_a_status)
{
    char h[SBX_KEY_HASH_LEN + 1];
    cr_assert_eq(sbx_key_hash(NULL, h), SBX_E_INVALID);
    cr_assert_eq(sbx_key_hash("abc", NULL), SBX_E_INVALID);
}
